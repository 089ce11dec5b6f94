//! A PG-wire connection string (PostgreSQL, QuestDB's PG wire) with libpq's TLS settings, turned
//! into a tokio-postgres configuration and a rustls connector.
//!
//! tokio-postgres knows `sslmode=disable|prefer|require` and nothing of certificates; libpq's
//! `sslmode=verify-ca|verify-full` and `sslrootcert` are taken out of the string here (URL
//! `postgres://…?sslmode=verify-full&sslrootcert=/ca.pem` or key-value
//! `host=… sslmode=verify-full sslrootcert=/ca.pem`) and the rest is parsed by tokio-postgres.
//! The modes mean what libpq documents (PostgreSQL 15, "SSL Support"):
//!
//! - `disable`: plain text only.
//! - `prefer` (the default, as in libpq): TLS when the server offers it, plain text otherwise.
//! - `require`: TLS or no connection. Like libpq, the certificate is **not** checked (encryption
//!   without authentication) unless `sslrootcert` is given, in which case the chain is verified
//!   against it, as libpq does for a root file that exists (the same holds for `prefer`).
//! - `verify-ca`: TLS, and the server's chain must lead to a trusted CA; the host name is not
//!   checked.
//! - `verify-full`: as `verify-ca`, and the certificate must name the host connected to.
//!
//! Trusted CAs are `sslrootcert`'s PEM file alone when it names one; without it, or with libpq's
//! `sslrootcert=system`, the system store and the bundled Mozilla roots ([`crate::tls::Roots`]).
//! (libpq itself would look for `~/.postgresql/root.crt` and fail without it; a container has no
//! such home, and a managed database's CA is usually public or shipped as a file.) An
//! `sslrootcert` that cannot be read stops the start in every mode, never silently ignored.
//! `sslmode=allow` (plain text first, TLS on refusal) has no tokio-postgres counterpart and is
//! refused with a message naming the alternatives. Connections announce ALPN `postgresql`, as
//! libpq 17 does.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::tls::{Roots, TlsError};

/// libpq's `sslmode`, all of it that airq supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Plain text only.
    Disable,
    /// TLS when the server offers it.
    Prefer,
    /// TLS; the certificate checked only against an explicit `sslrootcert`.
    Require,
    /// TLS with a certificate chain to a trusted CA.
    VerifyCa,
    /// TLS with a trusted chain naming the host.
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<Self, PgTlsError> {
        match text {
            "disable" => Ok(Self::Disable),
            "prefer" => Ok(Self::Prefer),
            "require" => Ok(Self::Require),
            "verify-ca" => Ok(Self::VerifyCa),
            "verify-full" => Ok(Self::VerifyFull),
            "allow" => Err(PgTlsError::AllowUnsupported),
            other => Err(PgTlsError::UnknownMode(other.to_owned())),
        }
    }
}

/// Why a connection string cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PgTlsError {
    /// tokio-postgres refused the rest of the string.
    #[error("the connection string does not parse")]
    Parse(#[source] tokio_postgres::Error),
    /// `sslmode` is none of libpq's values.
    #[error("sslmode={0:?} is not one of disable, prefer, require, verify-ca, verify-full")]
    UnknownMode(String),
    /// `sslmode=allow`.
    #[error(
        "sslmode=allow is not supported: use prefer (TLS when the server offers it) or disable"
    )]
    AllowUnsupported,
    /// A parameter is given twice, or a key-value string is malformed.
    #[error("the connection string's {0}")]
    Malformed(&'static str),
    /// The trusted CAs could not be loaded.
    #[error("sslrootcert")]
    Roots(#[from] TlsError),
}

/// Where and how to connect: tokio-postgres's configuration and the TLS connector for it.
#[derive(Clone)]
pub struct PgTarget {
    /// Host, port, user, database and the other settings; `ssl_mode` set from `sslmode`.
    pub config: tokio_postgres::Config,
    /// The connector (used unless the mode is `disable`).
    pub tls: MakeRustlsConnect,
    /// The `sslmode` asked for.
    pub mode: SslMode,
}

impl std::fmt::Debug for PgTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTarget")
            .field("hosts", &self.config.get_hosts())
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl PgTarget {
    /// Parses a URL or key-value connection string.
    pub fn parse(text: &str) -> Result<Self, PgTlsError> {
        let (rest, settings) = take_tls_settings(text)?;
        let mut config: tokio_postgres::Config = rest.parse().map_err(PgTlsError::Parse)?;
        let mode = settings
            .mode
            .as_deref()
            .map_or(Ok(SslMode::Prefer), SslMode::parse)?;
        config.ssl_mode(match mode {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        });
        let roots = match settings.root_cert.as_deref() {
            None | Some("system") => Roots::Public,
            Some(path) => Roots::File(PathBuf::from(path)),
        };
        let check = match (mode, settings.root_cert.is_some()) {
            (SslMode::Disable | SslMode::Prefer | SslMode::Require, false) => Check::Nothing,
            (SslMode::Disable | SslMode::Prefer | SslMode::Require | SslMode::VerifyCa, _) => {
                Check::Chain
            }
            (SslMode::VerifyFull, _) => Check::ChainAndName,
        };
        let mut client = connector(check, &roots)?;
        client.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(Self {
            config,
            tls: MakeRustlsConnect::new(client),
            mode,
        })
    }
}

/// What the connector verifies of the server's certificate.
#[derive(Debug, Clone, Copy)]
enum Check {
    Nothing,
    Chain,
    ChainAndName,
}

fn connector(check: Check, roots: &Roots) -> Result<rustls::ClientConfig, PgTlsError> {
    let builder = crate::tls::builder()?;
    let provider = crate::tls::provider();
    let config = match check {
        Check::ChainAndName => builder.with_root_certificates(roots.store()?),
        Check::Chain => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(WithoutName {
                roots: Some(Arc::new(roots.store()?)),
                provider,
            })),
        Check::Nothing => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(WithoutName {
                roots: None,
                provider,
            })),
    };
    Ok(config.with_no_client_auth())
}

/// The certificate checks rustls has no ready verifier for. With `roots` (`verify-ca`), the chain
/// must lead to a trusted root and the name in it is not looked at; without (libpq's `prefer` and
/// `require` without `sslrootcert`), any certificate is accepted: the connection is encrypted, not
/// authenticated. Either way the handshake signature is checked, so the server holds the key of
/// the certificate it shows.
#[derive(Debug)]
struct WithoutName {
    roots: Option<Arc<RootCertStore>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for WithoutName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let certificate = rustls::server::ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &certificate,
                roots,
                intermediates,
                now,
                self.provider.signature_verification_algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// `sslmode` and `sslrootcert` as written in the connection string.
#[derive(Debug, Default, PartialEq, Eq)]
struct TlsSettings {
    mode: Option<String>,
    root_cert: Option<String>,
}

impl TlsSettings {
    /// Records `key = value` if it is one of ours; whether it was.
    fn take(&mut self, key: &str, value: String) -> Result<bool, PgTlsError> {
        let slot = match key {
            "sslmode" => &mut self.mode,
            "sslrootcert" => &mut self.root_cert,
            _ => return Ok(false),
        };
        if slot.replace(value).is_some() {
            return Err(PgTlsError::Malformed(
                "sslmode or sslrootcert is given twice",
            ));
        }
        Ok(true)
    }
}

/// The string without `sslmode` and `sslrootcert`, and their values.
fn take_tls_settings(text: &str) -> Result<(String, TlsSettings), PgTlsError> {
    let mut settings = TlsSettings::default();
    let mut removed: Vec<Range<usize>> = Vec::new();
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        let Some(query_at) = text.find('?') else {
            return Ok((text.to_owned(), settings));
        };
        let mut start = query_at + 1;
        for pair in text[query_at + 1..].split('&') {
            let end = start + pair.len();
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_encoding::percent_decode_str(value)
                .decode_utf8()
                .map_err(|_| PgTlsError::Malformed("query is not UTF-8 once decoded"))?;
            if settings.take(key, value.into_owned())? {
                removed.push(start..(end + 1).min(text.len()));
            }
            start = end + 1;
        }
    } else {
        for pair in key_values(text)? {
            if settings.take(pair.key, pair.value)? {
                removed.push(pair.span);
            }
        }
    }
    let mut rest = String::with_capacity(text.len());
    let mut kept_from = 0;
    for span in removed {
        rest.push_str(&text[kept_from..span.start]);
        kept_from = span.end;
    }
    rest.push_str(&text[kept_from..]);
    // A URL whose query held only our settings keeps a bare `?` or a trailing `&`, which
    // tokio-postgres reads as an empty parameter.
    let rest = rest.trim_end_matches(['?', '&']).to_owned();
    Ok((rest, settings))
}

/// One `key = value` of a key-value string.
#[derive(Debug)]
struct KeyValue<'a> {
    key: &'a str,
    /// Unquoted and unescaped.
    value: String,
    /// The bytes the pair occupies in the string.
    span: Range<usize>,
}

/// The pairs of a key-value string (libpq's syntax: values optionally in single quotes, `\`
/// escaping the next character).
fn key_values(text: &str) -> Result<Vec<KeyValue<'_>>, PgTlsError> {
    let bytes = text.as_bytes();
    let mut pairs = Vec::new();
    let mut at = 0;
    let skip_space = |mut at: usize| {
        while at < bytes.len() && bytes[at].is_ascii_whitespace() {
            at += 1;
        }
        at
    };
    loop {
        at = skip_space(at);
        if at == bytes.len() {
            return Ok(pairs);
        }
        let start = at;
        while at < bytes.len() && (bytes[at].is_ascii_alphanumeric() || bytes[at] == b'_') {
            at += 1;
        }
        let key = &text[start..at];
        at = skip_space(at);
        if key.is_empty() || bytes.get(at) != Some(&b'=') {
            return Err(PgTlsError::Malformed("key-value syntax (key=value …)"));
        }
        at = skip_space(at + 1);
        let quoted = bytes.get(at) == Some(&b'\'');
        if quoted {
            at += 1;
        }
        let mut value = Vec::new();
        loop {
            match bytes.get(at) {
                None if quoted => {
                    return Err(PgTlsError::Malformed("unterminated quoted value"));
                }
                None => break,
                Some(b'\'') if quoted => {
                    at += 1;
                    break;
                }
                Some(byte) if !quoted && byte.is_ascii_whitespace() => break,
                Some(b'\\') if at + 1 < bytes.len() => {
                    value.push(bytes[at + 1]);
                    at += 2;
                }
                Some(&byte) => {
                    value.push(byte);
                    at += 1;
                }
            }
        }
        let value = String::from_utf8(value)
            .map_err(|_| PgTlsError::Malformed("key-value syntax (a value is not UTF-8)"))?;
        pairs.push(KeyValue {
            key,
            value,
            span: start..at,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(text: &str) -> (String, Option<String>, Option<String>) {
        let (rest, settings) = take_tls_settings(text).expect("parses");
        (rest, settings.mode, settings.root_cert)
    }

    #[test]
    fn a_url_loses_only_the_tls_settings() {
        assert_eq!(
            split("postgres://u@h:5432/db?sslmode=verify-full&application_name=a&sslrootcert=%2Fca%20dir%2Fca.pem"),
            (
                "postgres://u@h:5432/db?application_name=a".to_owned(),
                Some("verify-full".to_owned()),
                Some("/ca dir/ca.pem".to_owned())
            )
        );
        assert_eq!(
            split("postgresql://h/db?sslmode=require").0,
            "postgresql://h/db"
        );
        assert_eq!(split("postgres://h/db").0, "postgres://h/db");
    }

    #[test]
    fn a_key_value_string_loses_only_the_tls_settings() {
        let (rest, mode, root) =
            split("host=h sslmode = verify-ca  sslrootcert='/my ca/c\\'a.pem' user=u");
        assert_eq!(mode.as_deref(), Some("verify-ca"));
        assert_eq!(root.as_deref(), Some("/my ca/c'a.pem"));
        assert_eq!(
            rest.split_whitespace().collect::<Vec<_>>(),
            ["host=h", "user=u"]
        );
    }

    #[test]
    fn modes_map_to_tokio_postgres() {
        let mode = |url: &str| PgTarget::parse(url).map(|target| target.config.get_ssl_mode());
        use tokio_postgres::config::SslMode as Wire;
        assert_eq!(mode("postgres://h/db").ok(), Some(Wire::Prefer));
        assert_eq!(
            mode("postgres://h/db?sslmode=disable").ok(),
            Some(Wire::Disable)
        );
        assert_eq!(
            mode("postgres://h/db?sslmode=verify-full").ok(),
            Some(Wire::Require)
        );
        assert!(matches!(
            mode("postgres://h/db?sslmode=allow"),
            Err(PgTlsError::AllowUnsupported)
        ));
        assert!(matches!(
            mode("postgres://h/db?sslmode=strict"),
            Err(PgTlsError::UnknownMode(_))
        ));
        assert!(matches!(
            mode("postgres://h/db?sslmode=require&sslmode=disable"),
            Err(PgTlsError::Malformed(_))
        ));
    }

    #[test]
    fn an_unreadable_root_certificate_stops_every_mode() {
        for mode in ["disable", "prefer", "require", "verify-ca", "verify-full"] {
            let url = format!("postgres://h/db?sslmode={mode}&sslrootcert=/nonexistent/ca.pem");
            assert!(
                matches!(PgTarget::parse(&url), Err(PgTlsError::Roots(_))),
                "{mode}"
            );
        }
    }
}
