@0xec096c9b8db2d4aa;

# The image manifest exactly as version 1 lays it out (format/schema/
# manifest.capnp without `VerityData.merkleTree`), for builds without
# metadata Merkle trees: their manifests are then the other
# implementation's byte for byte (a struct's size in a list is the
# schema's, so one more field changes every entry's bytes even unset).
# Write-only; readers use the format crate's schema, which reads both.

struct BlobRef {
        digest@0: Data;
        offset@1: UInt64;
        compressed@2: Bool;
}

struct VerityData {
        digest@0: Data;
        verity@1: Data;
}

struct Rootfs {
        metadatas@0: List(BlobRef);
        fsVerityData@1: List(VerityData);
        manifestVersion@2: UInt64;
}
