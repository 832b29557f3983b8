//! Secrets in memory that is wiped when dropped (hand-written: the crate has no dependencies).
//! What the library returns is copied straight into one of these, and the library's own copy
//! is wiped and freed at once; nothing of a secret is kept in an ordinary `String` or `Vec`.

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{compiler_fence, Ordering};

/// Bytes wiped (volatile writes, not elided) when dropped. Its `Debug` shows the length only.
pub struct Secret {
    bytes: Vec<u8>,
}

impl Secret {
    /// A copy of `bytes`, allocated once at its final size (no reallocation leaves a copy).
    pub fn copy_from(bytes: &[u8]) -> Secret {
        let mut owned = Vec::with_capacity(bytes.len());
        owned.extend_from_slice(bytes);
        Secret { bytes: owned }
    }

    /// The bytes.
    pub fn expose(&self) -> &[u8] {
        &self.bytes
    }
}

/// Zeroes `bytes` with volatile writes, fenced so the compiler keeps them before the free.
fn wipe(bytes: &mut [u8]) {
    for byte in bytes.iter_mut() {
        unsafe { std::ptr::write_volatile(byte, 0) };
    }
    compiler_fence(Ordering::SeqCst);
}

impl Drop for Secret {
    fn drop(&mut self) {
        let capacity = self.bytes.capacity();
        // The whole allocation, not only the length.
        unsafe { self.bytes.set_len(capacity) };
        wipe(&mut self.bytes);
    }
}

impl Deref for Secret {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.bytes
    }
}

impl PartialEq<[u8]> for Secret {
    fn eq(&self, other: &[u8]) -> bool {
        self.bytes == other
    }
}

impl PartialEq<Vec<u8>> for Secret {
    fn eq(&self, other: &Vec<u8>) -> bool {
        &self.bytes == other
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Secret) -> bool {
        self.bytes == other.bytes
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes)", self.bytes.len())
    }
}

/// UTF-8 text wiped when dropped: a password as `get_password` returns it.
pub struct SecretString {
    secret: Secret,
}

impl SecretString {
    /// The text of `secret`, or `secret` back (still to be wiped) when it is not UTF-8.
    pub fn from_secret(secret: Secret) -> Result<SecretString, Secret> {
        if std::str::from_utf8(&secret.bytes).is_ok() {
            Ok(SecretString { secret })
        } else {
            Err(secret)
        }
    }

    /// The text.
    pub fn expose(&self) -> &str {
        // Checked at construction.
        unsafe { std::str::from_utf8_unchecked(&self.secret.bytes) }
    }
}

impl Deref for SecretString {
    type Target = str;
    fn deref(&self) -> &str {
        self.expose()
    }
}

impl PartialEq<str> for SecretString {
    fn eq(&self, other: &str) -> bool {
        self.expose() == other
    }
}

impl PartialEq<&str> for SecretString {
    fn eq(&self, other: &&str) -> bool {
        self.expose() == *other
    }
}

impl PartialEq for SecretString {
    fn eq(&self, other: &SecretString) -> bool {
        self.expose() == other.expose()
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretString({} bytes)", self.secret.bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_secret() {
        let secret = Secret::copy_from(b"hunter2-secret");
        assert_eq!(format!("{secret:?}"), "Secret(14 bytes)");
        let text = SecretString::from_secret(Secret::copy_from(b"hunter2")).unwrap();
        assert_eq!(format!("{text:?}"), "SecretString(7 bytes)");
        assert!(SecretString::from_secret(Secret::copy_from(&[0xff])).is_err());
    }

    #[test]
    fn the_wipe_zeroes_every_byte_of_the_allocation() {
        let mut secret = Secret::copy_from(b"wipe-me-please");
        let pointer = secret.bytes.as_mut_ptr();
        let length = secret.bytes.len();
        // Drop in place, reading the bytes before the allocation is freed.
        let mut wiped = true;
        unsafe {
            let bytes = &mut secret.bytes;
            let capacity = bytes.capacity();
            bytes.set_len(capacity);
            super::wipe(bytes);
            for index in 0..length {
                wiped &= *pointer.add(index) == 0;
            }
        }
        assert!(wiped);
    }
}
