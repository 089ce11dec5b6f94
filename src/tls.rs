//! What airq's TLS clients trust: one place for the crypto provider and the certificate
//! authorities of every outbound TLS connection (PostgreSQL, QuestDB's PG wire, the identity
//! provider).
//!
//! [`Roots::Public`] is the operating system's store (`rustls-native-certs`: `/etc/ssl/certs` on
//! Debian, `SSL_CERT_FILE` / `SSL_CERT_DIR` when set) together with the Mozilla roots compiled
//! into the binary (`webpki-roots`), so a slim image without a CA bundle still reaches public
//! services and a host's own CAs are honoured where there is one. [`Roots::File`] trusts the
//! certificates of one PEM file and nothing else: a private CA, or a pinned one. Every
//! configuration uses the `ring` provider (the one hyper-rustls already brings) with rustls's safe
//! defaults: TLS 1.2 and 1.3, no other versions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

/// Which certificate authorities to trust.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Roots {
    /// The system store and the bundled Mozilla roots.
    Public,
    /// Only the certificates in this PEM file.
    File(PathBuf),
}

/// Why a trust store could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The CA file could not be read or is not PEM.
    #[error("reading the CA certificates in {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The CA file holds no certificate rustls accepts.
    #[error("{path} holds no usable CA certificate (PEM `CERTIFICATE` blocks expected)")]
    NoCertificates {
        /// The file.
        path: PathBuf,
    },
    /// Neither the system store nor the bundled roots gave a single certificate.
    #[error("no trusted CA certificates found")]
    NoPublicRoots,
    /// rustls refused the configuration.
    #[error("configuring TLS")]
    Config(#[from] rustls::Error),
}

impl Roots {
    /// `File` for a configured path, `Public` otherwise.
    pub fn from_file(path: Option<&Path>) -> Self {
        path.map_or(Self::Public, |path| Self::File(path.to_owned()))
    }

    /// The certificates as a rustls store.
    pub fn store(&self) -> Result<RootCertStore, TlsError> {
        let mut store = RootCertStore::empty();
        match self {
            Self::Public => {
                store.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
                let native = rustls_native_certs::load_native_certs();
                for error in &native.errors {
                    tracing::warn!(%error, "a certificate of the system store was not loaded");
                }
                // Certificates the system trusts but webpki cannot parse are skipped, as every
                // rustls client does; the bundled roots stay.
                store.add_parsable_certificates(native.certs);
                if store.is_empty() {
                    return Err(TlsError::NoPublicRoots);
                }
            }
            Self::File(path) => {
                let read = |source| TlsError::Read {
                    path: path.clone(),
                    source,
                };
                let certificates = CertificateDer::pem_file_iter(path)
                    .map_err(read)?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(read)?;
                store.add_parsable_certificates(certificates);
                if store.is_empty() {
                    return Err(TlsError::NoCertificates { path: path.clone() });
                }
            }
        }
        Ok(store)
    }

    /// A client configuration verifying servers against these roots and their host names.
    pub fn client_config(&self) -> Result<ClientConfig, TlsError> {
        Ok(builder()?
            .with_root_certificates(self.store()?)
            .with_no_client_auth())
    }
}

/// The one crypto provider of every client configuration.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A configuration builder on [`provider`] with rustls's safe protocol versions.
pub fn builder() -> Result<rustls::ConfigBuilder<ClientConfig, rustls::WantsVerifier>, TlsError> {
    Ok(ClientConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?)
}
