//! TLS through rustls: the `tls-*` directives and the server context they
//! build. The event loop's side (handshakes and encrypted I/O on its
//! non-blocking connections) is `server/tls.rs`; `docs/security.md` says
//! what each setting protects.
//!
//! A context is built from all the settings together, as Redis's
//! `tlsConfigure` does, at start-up when `tls-port` is set and again on
//! every CONFIG SET of a `tls-*` directive. Building reads the certificate,
//! key and CA files anew, so setting a file name (even the same one)
//! reloads it; connections accepted after that use the new context, those
//! already open keep theirs. A context that cannot be built refuses the
//! start or the CONFIG SET, and the old one stays.

pub mod ciphers;
mod keys;
pub mod sessions;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::server::{NoServerSessionStorage, WebPkiClientVerifier};
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;

/// Whether clients must present a certificate (`tls-auth-clients`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuthClients {
    /// No certificate is asked for.
    No,
    /// A certificate signed by a configured CA is required.
    #[default]
    Yes,
    /// A certificate is asked for, checked if sent, and may be omitted.
    Optional,
}

/// The `tls-*` directives Ferrite acts on, and the context built from them.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// `tls-port`: 0 for no TLS listener.
    pub port: u16,
    pub cert_file: String,
    pub key_file: String,
    pub key_file_pass: String,
    pub dh_params_file: String,
    pub ca_cert_file: String,
    pub ca_cert_dir: String,
    pub auth_clients: AuthClients,
    pub protocols: String,
    pub ciphers: String,
    pub ciphersuites: String,
    pub prefer_server_ciphers: bool,
    pub session_caching: bool,
    pub session_cache_size: usize,
    pub session_cache_timeout_s: u64,
    /// The context new TLS connections use; `None` until TLS is set up.
    pub context: Option<Arc<ServerConfig>>,
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// Sets the field of `tls-*` directive `name` from its checked text;
/// `false` when it is not one Ferrite acts on.
pub fn store(tls: &mut Settings, name: &str, text: &str) -> bool {
    let number = |t: &str| t.parse().unwrap_or_default();
    match name {
        "tls-port" => tls.port = number(text) as u16,
        "tls-cert-file" => tls.cert_file = text.into(),
        "tls-key-file" => tls.key_file = text.into(),
        "tls-key-file-pass" => tls.key_file_pass = text.into(),
        "tls-dh-params-file" => tls.dh_params_file = text.into(),
        "tls-ca-cert-file" => tls.ca_cert_file = text.into(),
        "tls-ca-cert-dir" => tls.ca_cert_dir = text.into(),
        "tls-auth-clients" => {
            tls.auth_clients = match text.to_ascii_lowercase().as_str() {
                "no" => AuthClients::No,
                "optional" => AuthClients::Optional,
                _ => AuthClients::Yes,
            }
        }
        "tls-protocols" => tls.protocols = text.into(),
        "tls-ciphers" => tls.ciphers = text.into(),
        "tls-ciphersuites" => tls.ciphersuites = text.into(),
        "tls-prefer-server-ciphers" => tls.prefer_server_ciphers = text == "yes",
        "tls-session-caching" => tls.session_caching = text == "yes",
        "tls-session-cache-size" => tls.session_cache_size = number(text) as usize,
        "tls-session-cache-timeout" => tls.session_cache_timeout_s = number(text),
        _ => return false,
    }
    true
}

/// The text of `tls-*` directive `name`, as CONFIG GET shows it.
pub fn show(tls: &Settings, name: &str) -> Option<String> {
    Some(match name {
        "tls-port" => tls.port.to_string(),
        "tls-cert-file" => tls.cert_file.clone(),
        "tls-key-file" => tls.key_file.clone(),
        "tls-key-file-pass" => tls.key_file_pass.clone(),
        "tls-dh-params-file" => tls.dh_params_file.clone(),
        "tls-ca-cert-file" => tls.ca_cert_file.clone(),
        "tls-ca-cert-dir" => tls.ca_cert_dir.clone(),
        "tls-auth-clients" => match tls.auth_clients {
            AuthClients::No => "no",
            AuthClients::Yes => "yes",
            AuthClients::Optional => "optional",
        }
        .into(),
        "tls-protocols" => tls.protocols.clone(),
        "tls-ciphers" => tls.ciphers.clone(),
        "tls-ciphersuites" => tls.ciphersuites.clone(),
        "tls-prefer-server-ciphers" => yes_no(tls.prefer_server_ciphers),
        "tls-session-caching" => yes_no(tls.session_caching),
        "tls-session-cache-size" => tls.session_cache_size.to_string(),
        "tls-session-cache-timeout" => tls.session_cache_timeout_s.to_string(),
        _ => return None,
    })
}

/// The protocol versions `tls-protocols` allows (empty: 1.2 and 1.3).
fn protocols(text: &str) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let mut versions = Vec::new();
    for name in text.split_whitespace() {
        let version = match name.to_ascii_lowercase().as_str() {
            "tlsv1.2" => &rustls::version::TLS12,
            "tlsv1.3" => &rustls::version::TLS13,
            "tlsv1" | "tlsv1.1" => {
                return Err(format!(
                    "tls-protocols: {name} is not supported (rustls implements TLSv1.2 and TLSv1.3 only)"
                ))
            }
            _ => {
                return Err(format!(
                    "tls-protocols: invalid protocol '{name}' (use TLSv1.2 and/or TLSv1.3)"
                ))
            }
        };
        if !versions.contains(&version) {
            versions.push(version);
        }
    }
    if versions.is_empty() {
        versions = vec![&rustls::version::TLS13, &rustls::version::TLS12];
    }
    Ok(versions)
}

/// The cipher suites the settings allow, TLS 1.3 ones first.
fn suites(tls: &Settings) -> Result<Vec<rustls::SupportedCipherSuite>, String> {
    let all = ciphers::all();
    let v13: Vec<_> = if tls.ciphersuites.trim().is_empty() {
        all.iter()
            .copied()
            .filter(|s| s.tls13().is_some())
            .collect()
    } else {
        ciphers::tls13(&tls.ciphersuites)?
    };
    let v12: Vec<_> = if tls.ciphers.trim().is_empty() {
        all.iter()
            .copied()
            .filter(|s| s.tls13().is_none())
            .collect()
    } else {
        ciphers::tls12(&tls.ciphers)?
    };
    Ok(v13.into_iter().chain(v12).collect())
}

/// The CA certificates of `tls-ca-cert-file` and every certificate file
/// in `tls-ca-cert-dir` (files with no certificate in them are skipped,
/// as OpenSSL's hashed directories hold other files too).
fn roots(tls: &Settings) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let mut add = |path: &Path, strict: bool| -> Result<(), String> {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("tls-ca-cert: cannot read {}: {e}", path.display()))?;
        if certs.is_empty() && strict {
            return Err(format!(
                "tls-ca-cert-file {}: no certificate",
                path.display()
            ));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("tls-ca-cert: {}: {e}", path.display()))?;
        }
        Ok(())
    };
    if !tls.ca_cert_file.is_empty() {
        add(Path::new(&tls.ca_cert_file), true)?;
    }
    if !tls.ca_cert_dir.is_empty() {
        let dir = std::fs::read_dir(&tls.ca_cert_dir)
            .map_err(|e| format!("tls-ca-cert-dir {}: {e}", tls.ca_cert_dir))?;
        for entry in dir.flatten() {
            let path = entry.path();
            if path.is_file() && add(&path, false).is_err() {
                tracing::debug!("tls-ca-cert-dir: skipping {}", path.display());
            }
        }
    }
    Ok(roots)
}

/// Checks `tls-dh-params-file`. rustls implements no finite-field
/// Diffie-Hellman suite (its key exchanges are all elliptic-curve), so
/// the parameters are read and checked, as Redis loads them, but have no
/// suite to serve.
fn check_dh_params(path: &str) -> Result<(), String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("tls-dh-params-file {path}: {e}"))?;
    if text.contains("-----BEGIN DH PARAMETERS-----")
        || text.contains("-----BEGIN X9.42 DH PARAMETERS-----")
    {
        Ok(())
    } else {
        Err(format!("tls-dh-params-file {path}: no DH parameters in it"))
    }
}

/// Builds the server context of `tls`, reading its files now.
pub fn build(tls: &Settings) -> Result<Arc<ServerConfig>, String> {
    if tls.cert_file.is_empty() {
        return Err("no tls-cert-file configured".into());
    }
    if tls.key_file.is_empty() {
        return Err("no tls-key-file configured".into());
    }
    if tls.auth_clients != AuthClients::No
        && tls.ca_cert_file.is_empty()
        && tls.ca_cert_dir.is_empty()
    {
        return Err(
            "either tls-ca-cert-file or tls-ca-cert-dir must be set when tls-auth-clients is yes or optional"
                .into(),
        );
    }
    let versions = protocols(&tls.protocols)?;
    let provider = Arc::new(CryptoProvider {
        cipher_suites: suites(tls)?,
        ..rustls::crypto::ring::default_provider()
    });
    if !tls.dh_params_file.is_empty() {
        check_dh_params(&tls.dh_params_file)?;
    }
    let certs = CertificateDer::pem_file_iter(&tls.cert_file)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| format!("tls-cert-file {}: {e}", tls.cert_file))?;
    if certs.is_empty() {
        return Err(format!("tls-cert-file {}: no certificate", tls.cert_file));
    }
    let key = keys::load(&tls.key_file, &tls.key_file_pass)?;
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| format!("tls-protocols/tls-ciphers: {e}"))?;
    let builder = if tls.auth_clients == AuthClients::No {
        builder.with_no_client_auth()
    } else {
        let mut verifier = WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots(tls)?),
            Arc::clone(&provider),
        );
        if tls.auth_clients == AuthClients::Optional {
            verifier = verifier.allow_unauthenticated();
        }
        let verifier = verifier
            .build()
            .map_err(|e| format!("tls-ca-cert-file/dir: {e}"))?;
        builder.with_client_cert_verifier(verifier)
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| format!("tls-cert-file/tls-key-file: {e}"))?;
    config.ignore_client_order = tls.prefer_server_ciphers;
    if tls.session_caching {
        config.session_storage = Arc::new(sessions::SessionCache::new(
            tls.session_cache_size,
            Duration::from_secs(tls.session_cache_timeout_s),
        ));
    } else {
        config.session_storage = Arc::new(NoServerSessionStorage {});
        config.send_tls13_tickets = 0;
    }
    Ok(Arc::new(config))
}

/// Whether TLS must be set up for `tls` (a TLS port is configured).
pub fn wanted(tls: &Settings) -> bool {
    tls.port != 0
}

/// What a CONFIG SET of `tls-*` directives changes in the running server.
#[derive(Debug)]
pub struct Reconfigured {
    /// Listeners for a new `tls-port` (empty: stop listening for TLS).
    pub listeners: Option<Vec<std::net::TcpListener>>,
}

/// Applies a CONFIG SET that named the directives `names` to `next` (the
/// configuration it produced; `current` is the one in force): rebuilds
/// the context if a `tls-*` directive was named and TLS is wanted, and
/// binds a changed `tls-port`. On error nothing changes; the error is the
/// reply, naming the first `tls-*` directive set.
pub fn reconfigure(
    next: &mut crate::config::Config,
    current: &crate::config::Config,
    names: &[&str],
) -> Result<Reconfigured, String> {
    let Some(first) = names
        .iter()
        .find(|n| n.len() > 4 && n[..4].eq_ignore_ascii_case("tls-"))
    else {
        return Ok(Reconfigured { listeners: None });
    };
    let first = first.to_ascii_lowercase();
    let failed = |what: &str| {
        format!("ERR CONFIG SET failed (possibly related to argument '{first}') - {what}")
    };
    if wanted(&next.tls) {
        let context = build(&next.tls).map_err(|reason| {
            tracing::warn!("CONFIG SET {first}: cannot configure TLS: {reason}");
            failed(&format!("Unable to update TLS configuration: {reason}"))
        })?;
        next.tls.context = Some(context);
    }
    let mut listeners = None;
    if next.tls.port != current.tls.port {
        listeners = Some(if next.tls.port == 0 {
            Vec::new()
        } else {
            crate::server::bind_listeners(&next.bind, next.tls.port).map_err(|e| {
                tracing::warn!("CONFIG SET tls-port {}: {e}", next.tls.port);
                failed("Unable to listen on this port. Check server logs.")
            })?
        });
    }
    Ok(Reconfigured { listeners })
}
