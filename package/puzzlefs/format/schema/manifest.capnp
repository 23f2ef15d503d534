@0xe0b6d460b1f22bb5;

using Metadata = import "metadata.capnp";

struct VerityData {
        digest@0: Data;
        verity@1: Data;
        # Optional: the name (sha256) of a blob holding this blob's fs-verity
        # Merkle tree, top level first (metadata blobs of more than one block).
        merkleTree@2: Data;
}

struct Rootfs {
        metadatas@0: List(Metadata.BlobRef);
        fsVerityData@1: List(VerityData);
        manifestVersion@2: UInt64;
}
