//! Reading `tls-key-file`: a PEM private key (PKCS#8, PKCS#1 RSA or SEC1
//! EC), or a PKCS#8 key encrypted with `tls-key-file-pass` (PBES2 with
//! PBKDF2 or scrypt and AES, what `openssl genpkey -aes256` and OpenSSL
//! 3's `pkcs8 -topk8` write). The older OpenSSL-specific encryption
//! (`Proc-Type: 4,ENCRYPTED` headers) is refused with a hint to convert
//! the key, since no maintained crate reads it.

use pkcs8::der::Document;
use pkcs8::EncryptedPrivateKeyInfo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};

const ENCRYPTED_BEGIN: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
const ENCRYPTED_END: &str = "-----END ENCRYPTED PRIVATE KEY-----";

/// Loads the private key at `path`, decrypting it with `pass` if it is
/// encrypted.
pub fn load(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let text = std::fs::read(path).map_err(|e| format!("tls-key-file {path}: {e}"))?;
    let text = String::from_utf8_lossy(&text);
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(format!(
            "tls-key-file {path}: legacy OpenSSL key encryption is not supported; convert it with `openssl pkcs8 -topk8 -v2 aes-256-cbc`"
        ));
    }
    if let Some(start) = text.find(ENCRYPTED_BEGIN) {
        return decrypt(path, &text[start..], pass);
    }
    PrivateKeyDer::from_pem_slice(text.as_bytes())
        .map_err(|e| format!("tls-key-file {path}: no usable private key ({e})"))
}

fn decrypt(path: &str, pem: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    if pass.is_empty() {
        return Err(format!(
            "tls-key-file {path} is encrypted and tls-key-file-pass is empty"
        ));
    }
    let end = pem
        .find(ENCRYPTED_END)
        .map(|at| at + ENCRYPTED_END.len())
        .ok_or_else(|| format!("tls-key-file {path}: unterminated PEM block"))?;
    let (_, document) = Document::from_pem(&pem[..end])
        .map_err(|e| format!("tls-key-file {path}: bad encrypted key: {e}"))?;
    let info = EncryptedPrivateKeyInfo::try_from(document.as_bytes())
        .map_err(|e| format!("tls-key-file {path}: bad encrypted key: {e}"))?;
    let plain = info
        .decrypt(pass.as_bytes())
        .map_err(|e| format!("tls-key-file {path}: cannot decrypt with tls-key-file-pass: {e}"))?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        plain.as_bytes().to_vec(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pkcs8::der::pem::LineEnding;
    use pkcs8::pkcs5::pbes2;
    use pkcs8::PrivateKeyInfo;

    /// Writes `pem` to a temporary file and loads it with `pass`.
    fn load_text(pem: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("key.pem");
        std::fs::write(&path, pem).unwrap();
        load(path.to_str().unwrap(), pass)
    }

    #[test]
    fn an_encrypted_pkcs8_key_needs_its_passphrase() {
        let key = rcgen::KeyPair::generate().unwrap();
        let der = key.serialize_der();
        let params =
            pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, b"saltsalt", &[7; 16]).unwrap();
        let encrypted = PrivateKeyInfo::try_from(der.as_slice())
            .unwrap()
            .encrypt_with_params(params, b"secret")
            .unwrap()
            .to_pem("ENCRYPTED PRIVATE KEY", LineEnding::LF)
            .unwrap();
        let loaded = load_text(&encrypted, "secret").unwrap();
        assert_eq!(loaded.secret_der(), der.as_slice());
        let err = load_text(&encrypted, "").unwrap_err();
        assert!(err.contains("tls-key-file-pass is empty"), "{err}");
        let err = load_text(&encrypted, "wrong").unwrap_err();
        assert!(err.contains("cannot decrypt"), "{err}");
        // The plain key loads without a passphrase.
        assert!(load_text(&key.serialize_pem(), "").is_ok());
        let legacy = "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n";
        assert!(load_text(legacy, "x").unwrap_err().contains("legacy"));
        assert!(load_text("nothing here", "").is_err());
    }
}
