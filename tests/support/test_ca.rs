//! A throwaway certificate authority for TLS tests: a CA and server certificates it signs, made
//! fresh by each test with rcgen and written as PEM files into a temporary directory. Shared by
//! the suites that speak TLS; each uses the part it needs.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
};

/// A CA and the directory its files are written to.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: tempfile::TempDir,
}

/// A server certificate signed by a [`TestCa`]: PEM files and the raw material for rustls.
pub struct ServerCert {
    /// The certificate (PEM file).
    pub cert: PathBuf,
    /// Its private key (PEM file, PKCS#8).
    pub key: PathBuf,
    /// The certificate, DER.
    pub cert_der: rustls::pki_types::CertificateDer<'static>,
    /// The key, DER.
    pub key_der: rustls::pki_types::PrivateKeyDer<'static>,
}

impl TestCa {
    /// A new CA named `name`.
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().expect("CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("CA certificate");
        let dir = tempfile::tempdir().expect("temporary directory for certificates");
        std::fs::write(dir.path().join("ca.pem"), issuer.pem()).expect("CA written");
        Self { issuer, dir }
    }

    /// The CA certificate's PEM file.
    pub fn cert_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A server certificate for `names` (DNS names or IP addresses), signed by this CA.
    pub fn server_cert(&self, names: &[&str]) -> ServerCert {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let mut params = CertificateParams::new(names).expect("server parameters");
        params
            .distinguished_name
            .push(DnType::CommonName, "airq test server");
        let key = KeyPair::generate().expect("server key");
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("server certificate");
        let stem = uuid::Uuid::new_v4().simple().to_string();
        let cert_path = self.dir.path().join(format!("{stem}.crt"));
        let key_path = self.dir.path().join(format!("{stem}.key"));
        std::fs::write(&cert_path, cert.pem()).expect("certificate written");
        std::fs::write(&key_path, key.serialize_pem()).expect("key written");
        ServerCert {
            cert: cert_path,
            key: key_path,
            cert_der: cert.der().clone(),
            key_der: rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        }
    }
}
