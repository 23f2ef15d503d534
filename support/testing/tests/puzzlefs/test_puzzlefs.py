"""Runtime test of the PuzzleFS appliance in Buildroot's test framework.

Buildroot's run-tests only discovers tests under its own support/testing,
so link this directory there, then run it like any Buildroot test:

  ln -s <this repo>/support/testing/tests/puzzlefs \\
        <buildroot>/support/testing/tests/puzzlefs
  <buildroot>/support/testing/run-tests -d <dl dir> -o <out dir> \\
        tests.puzzlefs.test_puzzlefs.TestPuzzleFS

It builds configs/puzzlefs_qemu_defconfig with this br2-external tree,
boots the appliance and mounts a sample image made by the post-build
scripts with the kernel driver.
"""
import os

import infra.basetest

HERE = os.path.dirname(os.path.realpath(__file__))
TREE = os.path.realpath(os.path.join(HERE, "..", "..", "..", ".."))


def defconfig(name):
    with open(os.path.join(TREE, "configs", name)) as f:
        return f.read()


class TestPuzzleFS(infra.basetest.BRTest):
    br2_external = [os.path.join(TREE, "br2-external")]
    config = defconfig("puzzlefs_qemu_defconfig")
    timeout = 120

    def boot(self):
        images = os.path.join(self.builddir, "images")
        initrd = os.path.join(images, "rootfs.cpio")
        self.emulator.boot(arch="x86_64",
                           kernel=os.path.join(images, "bzImage"),
                           kernel_cmdline=["console=ttyS0"],
                           options=["-m", "1024", "-nic", "none",
                                    "-initrd", initrd])
        # overlay/etc/inittab: a login-free root shell on ttyS0.
        wait = self.timeout * self.emulator.timeout_multiplier
        self.emulator.qemu.expect("puzzlefs# ", timeout=wait)
        self.emulator.connect_shell()

    def test_run(self):
        self.boot()
        self.assertRunOk("modprobe puzzlefs", timeout=self.timeout)
        out, rc = self.emulator.run("cat /root/pzk/plain-plain.digest")
        self.assertEqual(rc, 0)
        digest = out[0].strip()
        self.assertRunOk("mkdir -p /mnt/pz")
        opts = "oci_root_dir=/root/pzk/plain/oci,image_manifest=" + digest
        self.assertRunOk("mount -t puzzlefs -o {} none /mnt/pz".format(opts),
                         timeout=self.timeout)
        out, rc = self.emulator.run("cat /mnt/pz/hello.txt")
        self.assertEqual(rc, 0)
        self.assertEqual(out, ["hello from puzzlefs"])
        out, rc = self.emulator.run("grep -c puzzlefs /proc/mounts")
        self.assertEqual((out, rc), (["1"], 0))
        self.assertRunOk("umount /mnt/pz")
        self.assertRunOk("rmmod puzzlefs")
