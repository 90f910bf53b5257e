//! `tls-ciphers` (TLS 1.2, OpenSSL's cipher-list syntax) and
//! `tls-ciphersuites` (TLS 1.3, a colon-separated list of suite names),
//! read against the suites rustls implements.
//!
//! rustls offers only forward-secret AEAD suites: three for TLS 1.3 and
//! six ECDHE suites for TLS 1.2. A list may name them by OpenSSL's names
//! (`ECDHE-RSA-AES128-GCM-SHA256`) or by the IANA ones; `DEFAULT`, `ALL`
//! and `HIGH` stand for all six, as each of those OpenSSL classes holds
//! them all; `!X` / `-X` removes suite X. Excluding an OpenSSL class
//! that holds none of rustls's suites (`!aNULL`, `!MD5`, `!RC4`...)
//! changes nothing and is accepted, so common Redis configurations load.
//! Anything else (a suite rustls does not implement, `+` reordering,
//! `@STRENGTH`) is refused with its name rather than silently ignored.

use rustls::crypto::ring::cipher_suite as cs;
use rustls::SupportedCipherSuite;

/// TLS 1.2 suites by OpenSSL name, in rustls's order of preference.
const TLS12: [(&str, SupportedCipherSuite); 6] = [
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// TLS 1.3 suites by their (OpenSSL and IANA) names.
const TLS13: [(&str, SupportedCipherSuite); 3] = [
    ("TLS_AES_256_GCM_SHA384", cs::TLS13_AES_256_GCM_SHA384),
    ("TLS_AES_128_GCM_SHA256", cs::TLS13_AES_128_GCM_SHA256),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        cs::TLS13_CHACHA20_POLY1305_SHA256,
    ),
];

/// OpenSSL classes that contain every suite of [`TLS12`].
const ALL_CLASSES: [&str; 7] = [
    "DEFAULT", "ALL", "HIGH", "ECDHE", "EECDH", "AESGCM", "kECDHE",
];

/// OpenSSL classes that contain none of [`TLS12`]: excluding them is a
/// no-op, including them is refused.
const FOREIGN_CLASSES: [&str; 27] = [
    "aNULL",
    "eNULL",
    "NULL",
    "COMPLEMENTOFDEFAULT",
    "MEDIUM",
    "LOW",
    "EXP",
    "EXPORT",
    "MD5",
    "RC4",
    "3DES",
    "DES",
    "IDEA",
    "SEED",
    "CAMELLIA",
    "ARIA",
    "PSK",
    "SRP",
    "DSS",
    "aDSS",
    "kRSA",
    "RSA",
    "DH",
    "EDH",
    "DHE",
    "kDHE",
    "ADH",
];

fn iana_name(suite: SupportedCipherSuite) -> String {
    format!("{:?}", suite.suite())
}

/// The TLS 1.2 suites `text` (a `tls-ciphers` value) selects, in order.
pub fn tls12(text: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let mut chosen: Vec<SupportedCipherSuite> = Vec::new();
    for token in text
        .split([':', ',', ' '])
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        let (remove, name) = match token.strip_prefix(['!', '-']) {
            Some(rest) => (true, rest),
            None => (false, token),
        };
        let named: Vec<SupportedCipherSuite> = if ALL_CLASSES.contains(&name) {
            TLS12.iter().map(|(_, s)| *s).collect()
        } else if FOREIGN_CLASSES.contains(&name) {
            if remove {
                continue;
            }
            return Err(format!(
                "tls-ciphers: '{name}' selects no cipher rustls implements"
            ));
        } else if let Some(suite) = TLS12
            .iter()
            .find(|(n, s)| *n == name || iana_name(*s) == name)
            .map(|(_, s)| *s)
        {
            vec![suite]
        } else {
            return Err(format!(
                "tls-ciphers: '{token}' is not supported (rustls implements {})",
                supported12()
            ));
        };
        if remove {
            chosen.retain(|s| !named.contains(s));
        } else {
            for suite in named {
                if !chosen.contains(&suite) {
                    chosen.push(suite);
                }
            }
        }
    }
    if chosen.is_empty() {
        return Err("tls-ciphers selects no cipher".into());
    }
    Ok(chosen)
}

/// The TLS 1.3 suites `text` (a `tls-ciphersuites` value) selects, in order.
pub fn tls13(text: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let mut chosen = Vec::new();
    for name in text.split(':').map(str::trim).filter(|t| !t.is_empty()) {
        let Some(suite) = TLS13
            .iter()
            .find(|(n, s)| *n == name || iana_name(*s) == name)
            .map(|(_, s)| *s)
        else {
            let known: Vec<&str> = TLS13.iter().map(|(n, _)| *n).collect();
            return Err(format!(
                "tls-ciphersuites: '{name}' is not supported (rustls implements {})",
                known.join(", ")
            ));
        };
        if !chosen.contains(&suite) {
            chosen.push(suite);
        }
    }
    if chosen.is_empty() {
        return Err("tls-ciphersuites selects no cipher suite".into());
    }
    Ok(chosen)
}

fn supported12() -> String {
    TLS12.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

/// Every suite rustls offers when neither list is set.
pub fn all() -> Vec<SupportedCipherSuite> {
    TLS13
        .iter()
        .map(|(_, s)| *s)
        .chain(TLS12.iter().map(|(_, s)| *s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssl_lists_select_rustls_suites_or_are_refused() {
        assert_eq!(tls12("DEFAULT:!MEDIUM:!aNULL").unwrap().len(), 6);
        let two = tls12("ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256").unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(tls12("HIGH:!ECDHE-RSA-CHACHA20-POLY1305").unwrap().len(), 5);
        let err = tls12("DES-CBC3-SHA").unwrap_err();
        assert!(err.contains("DES-CBC3-SHA"), "{err}");
        assert!(tls12("MEDIUM").is_err());
        assert!(tls12("!ALL").is_err(), "an empty selection is refused");
        assert_eq!(
            tls13("TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256")
                .unwrap()
                .len(),
            2
        );
        assert!(tls13("TLS_AES_128_CCM_SHA256").is_err());
        assert_eq!(all().len(), 9);
    }
}
