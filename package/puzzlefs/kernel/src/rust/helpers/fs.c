// SPDX-License-Identifier: GPL-2.0

#include <linux/cacheflush.h>
#include <linux/completion.h>
#include <linux/cred.h>
#include <linux/fs.h>
#include <linux/fs_parser.h>
#include <linux/fsverity.h>
#include <linux/highmem.h>
#include <linux/lockdep.h>
#include <linux/mm.h>
#include <linux/mount.h>
#include <linux/pagemap.h>
#include <linux/rcupdate.h>

bool rust_helper_dir_emit(struct dir_context *ctx, const char *name, int namelen,
			  u64 ino, unsigned int type)
{
	return dir_emit(ctx, name, namelen, ino, type);
}

bool rust_helper_dir_emit_dots(struct file *file, struct dir_context *ctx)
{
	return dir_emit_dots(file, ctx);
}

int rust_helper_fs_parse(struct fs_context *fc,
			 const struct fs_parameter_spec *desc,
			 struct fs_parameter *param,
			 struct fs_parse_result *result)
{
	return fs_parse(fc, desc, param, result);
}

loff_t rust_helper_i_size_read(const struct inode *inode)
{
	return i_size_read(inode);
}

void rust_helper_i_uid_write(struct inode *inode, uid_t uid)
{
	i_uid_write(inode, uid);
}

void rust_helper_i_gid_write(struct inode *inode, gid_t gid)
{
	i_gid_write(inode, gid);
}

struct inode *rust_helper_folio_inode(struct folio *folio)
{
	return folio_inode(folio);
}

loff_t rust_helper_folio_pos(struct folio *folio)
{
	return folio_pos(folio);
}

size_t rust_helper_folio_size(struct folio *folio)
{
	return folio_size(folio);
}

void rust_helper_folio_mark_uptodate(struct folio *folio)
{
	folio_mark_uptodate(folio);
}

void *rust_helper_kmap_local_folio(struct folio *folio, size_t offset)
{
	return kmap_local_folio(folio, offset);
}

void rust_helper_memcpy_to_folio(struct folio *folio, size_t offset,
				 const char *from, size_t len)
{
	memcpy_to_folio(folio, offset, from, len);
}

/*
 * A real function on architectures with aliasing data caches (its binding then
 * takes precedence over this helper), an empty inline on the others.
 */
void rust_helper_flush_dcache_folio(struct folio *folio)
{
	flush_dcache_folio(folio);
}

void rust_helper_folio_zero_segment(struct folio *folio, size_t start, size_t xend)
{
	folio_zero_segment(folio, start, xend);
}

const struct cred *rust_helper_get_current_cred(void)
{
	return get_current_cred();
}

void rust_helper_put_cred(const struct cred *cred)
{
	put_cred(cred);
}

struct mnt_idmap *rust_helper_mnt_idmap(const struct vfsmount *mnt)
{
	return mnt_idmap(mnt);
}

void rust_helper_mapping_set_large_folios(struct address_space *mapping)
{
	mapping_set_large_folios(mapping);
}

/*
 * Real functions with CONFIG_LOCKDEP, empty inlines without: Rust calls these
 * for the lock class keys of a file system type it allocated.
 */
void rust_helper_lockdep_register_key(struct lock_class_key *key)
{
	lockdep_register_key(key);
}

void rust_helper_lockdep_unregister_key(struct lock_class_key *key)
{
	lockdep_unregister_key(key);
}

/* fsverity_get_digest() is an inline stub when CONFIG_FS_VERITY is off. */
int rust_helper_fsverity_get_digest(struct inode *inode,
				    u8 raw_digest[FS_VERITY_MAX_DIGEST_SIZE],
				    u8 *alg, enum hash_algo *halg)
{
	return fsverity_get_digest(inode, raw_digest, alg, halg);
}

/* Not in the generated bindings: a module whose RCU callbacks free inodes waits with it. */
void rust_helper_rcu_barrier(void)
{
	rcu_barrier();
}

struct folio *rust_helper_readahead_folio(struct readahead_control *ractl)
{
	return readahead_folio(ractl);
}

loff_t rust_helper_readahead_pos(struct readahead_control *rac)
{
	return readahead_pos(rac);
}

size_t rust_helper_readahead_length(struct readahead_control *rac)
{
	return readahead_length(rac);
}

pgoff_t rust_helper_readahead_index(struct readahead_control *rac)
{
	return readahead_index(rac);
}

unsigned int rust_helper_readahead_count(struct readahead_control *rac)
{
	return readahead_count(rac);
}

void rust_helper_folio_get(struct folio *folio)
{
	folio_get(folio);
}

void rust_helper_folio_put(struct folio *folio)
{
	folio_put(folio);
}

void rust_helper_init_sync_kiocb(struct kiocb *kiocb, struct file *filp)
{
	init_sync_kiocb(kiocb, filp);
}

void rust_helper_init_completion(struct completion *x)
{
	init_completion(x);
}

bool rust_helper_is_vmalloc_addr(const void *x)
{
	return is_vmalloc_addr(x);
}

/*
 * Real functions on architectures with aliasing data caches (their bindings
 * then take precedence over these helpers), empty inlines on the others.
 */
void rust_helper_flush_kernel_vmap_range(void *vaddr, int size)
{
	flush_kernel_vmap_range(vaddr, size);
}

void rust_helper_invalidate_kernel_vmap_range(void *vaddr, int size)
{
	invalidate_kernel_vmap_range(vaddr, size);
}
