// SPDX-License-Identifier: GPL-2.0

#include <linux/sched.h>

/* A macro in C (with a might_sleep check), so Rust calls it through here. */
void rust_helper_cond_resched(void)
{
	cond_resched();
}
