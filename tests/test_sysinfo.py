from peakbench.sysinfo import mount_of, snapshot

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro
30 22 0:26 / /mnt rw,nosuid shared:5 - tmpfs tmpfs rw,size=1024k
31 30 7:0 / /mnt/data rw,noatime shared:6 - xfs /dev/loop0 rw,attr2,inode64
32 30 0:40 / /mnt/my\\040disk rw shared:7 - btrfs /dev/loop1 rw,ssd
"""


def test_the_longest_mount_prefix_wins():
    assert mount_of("/mnt/data/run1", MOUNTINFO)["fs_type"] == "xfs"
    assert mount_of("/mnt/data", MOUNTINFO)["mount_options"] == "rw,noatime"
    assert mount_of("/mnt/database", MOUNTINFO)["fs_type"] == "tmpfs"  # a sibling name is not a prefix
    assert mount_of("/home/me", MOUNTINFO) == {
        "mount_point": "/",
        "fs_type": "ext4",
        "device": "/dev/sda1",
        "mount_options": "rw,relatime",
        "super_options": "rw,errors=remount-ro",
    }


def test_escaped_mount_points():
    assert mount_of("/mnt/my disk/x", MOUNTINFO)["device"] == "/dev/loop1"


def test_snapshot_of_this_machine(tmp_path):
    info = snapshot({"kind": "posix", "path": str(tmp_path)}, "peakbench-engine 0.1.0")
    assert info["cpu_count"] >= 1 and info["memory_bytes"] > 0 and info["kernel"]
    assert info["target_fs"]["fs_type"]  # whatever holds the temporary directory
    assert "target_fs" not in snapshot({"kind": "null"})
