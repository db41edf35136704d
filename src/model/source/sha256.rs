//! SHA-256 as hex: the Hub's check of a finished download, and the identity of a model's files
//! in the provenance of its runs ([`super::sha256_cache`] keeps those so that a file is read
//! once, not at every start).

use super::cancel::Cancel;
use sha2::{Digest, Sha256};
use std::io::{self, Read};

/// Why no digest came out.
#[derive(Debug)]
pub enum Hashing {
    Cancelled,
    Io(io::Error),
}

/// The digest of everything `reader` yields from where it stands, read 1 MiB at a time;
/// `cancel` is checked between reads, so that a file of several GB can be given up at once.
pub fn of_reader(reader: &mut impl Read, cancel: &Cancel) -> Result<String, Hashing> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; 1 << 20];
    loop {
        if cancel.is_cancelled() {
            return Err(Hashing::Cancelled);
        }
        match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buffer[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Hashing::Io(e)),
        }
    }
    Ok(hex(&hasher.finalize()))
}

/// The digest of bytes in memory (the embedded model's files, a cache key).
pub fn of_bytes(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_match_the_standard_vectors() {
        let empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(of_bytes(b""), empty);
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(of_bytes(b"abc"), abc);
        let mut reader: &[u8] = b"abc";
        assert_eq!(of_reader(&mut reader, &Cancel::default()).unwrap(), abc);
    }

    #[test]
    fn a_cancelled_hash_stops() {
        let cancel = Cancel::default();
        cancel.cancel();
        let mut reader: &[u8] = b"abc";
        assert!(matches!(
            of_reader(&mut reader, &cancel),
            Err(Hashing::Cancelled)
        ));
    }
}
