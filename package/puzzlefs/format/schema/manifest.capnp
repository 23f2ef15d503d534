@0xe0b6d460b1f22bb5;

using Metadata = import "metadata.capnp";

struct VerityData {
        digest@0: Data;
        verity@1: Data;
        # Optional: the name (sha256) of a blob holding this blob's fs-verity
        # Merkle tree, top level first (metadata blobs of more than one block).
        merkleTree@2: Data;
}

# One entry of `Rootfs.linkCounts`.
struct LinkCount {
        ino@0: UInt64;
        count@1: UInt32;
}

struct Rootfs {
        metadatas@0: List(Metadata.BlobRef);
        fsVerityData@1: List(VerityData);
        manifestVersion@2: UInt64;
        # Optional: the link counts of the file system the manifest
        # describes (its layers stacked): each inode that more than one
        # directory entry names (whiteouts are no names), sorted by ino,
        # with the number of entries that name it. Absent: not recorded
        # (a reader counts the entries); empty: no inode has two names.
        linkCounts@3: List(LinkCount);
}
