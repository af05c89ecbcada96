//! HTTPS: rustls over the same sockets the HTTP target uses, non-blocking in the event loop
//! and blocking (with timeouts) in the pool. A connection is a `Stream`, plain or TLS, so
//! the parser and the event loop stay one piece of code; a plain connection pays one match
//! per read and write.
//!
//! TLS errors become fault kinds: `tls_bad_certificate` (with webpki's reason when it is a
//! common one), `tls_not_tls` (the server's bytes are not TLS records, e.g. plain HTTP),
//! `tls_alert_<name>` (the server refused the handshake) and `tls_error` otherwise.

use anyhow::{anyhow, Context};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

/// What every TLS connection of a target shares: the configuration and the name to verify.
#[derive(Clone)]
pub struct Tls {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
}

impl Tls {
    /// Verify the server against the PEM bundle `ca`, or not at all (`ca` None: insecure=1).
    pub fn new(host: &str, ca: Option<&str>) -> anyhow::Result<Tls> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
        let config = match ca {
            Some(path) => {
                let mut roots = RootCertStore::empty();
                for cert in CertificateDer::pem_file_iter(path).with_context(|| format!("ca={path}: cannot read"))? {
                    let cert = cert.map_err(|e| anyhow!("ca={path}: not a PEM certificate bundle ({e})"))?;
                    roots.add(cert).map_err(|e| anyhow!("ca={path}: bad CA certificate ({e})"))?;
                }
                if roots.is_empty() {
                    anyhow::bail!("ca={path}: no certificate in the file");
                }
                builder.with_root_certificates(roots).with_no_client_auth()
            }
            None => {
                builder.dangerous().with_custom_certificate_verifier(Arc::new(Unverified(provider.signature_verification_algorithms))).with_no_client_auth()
            }
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let name = ServerName::try_from(host.to_string()).map_err(|e| anyhow!("{host}: not a TLS server name ({e})"))?;
        Ok(Tls { config: Arc::new(config), name })
    }

    pub fn wrap(&self, tcp: TcpStream) -> std::io::Result<Stream> {
        let tls = ClientConnection::new(self.config.clone(), self.name.clone()).map_err(fault)?;
        Ok(Stream::Tls(Box::new(TlsStream { tcp, tls })))
    }
}

/// insecure=1: any certificate is accepted (its signature over the handshake is still checked,
/// so the connection is encrypted to whoever holds the key).
#[derive(Debug)]
struct Unverified(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(&self, _: &CertificateDer, _: &[CertificateDer], _: &ServerName, _: &[u8], _: UnixTime) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// A connection as the parser reads it and the requests are written to it.
pub enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
}

impl Stream {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(t) => &t.tcp,
        }
    }

    /// Blocking connections finish the handshake at once, so a request's body never waits in
    /// rustls's buffer for keys (the event loop's connections finish it as replies arrive).
    pub fn handshake(&mut self) -> std::io::Result<()> {
        if let Stream::Tls(t) = self {
            while t.tls.is_handshaking() {
                t.tls.complete_io(&mut t.tcp).map_err(rustls_io)?;
            }
        }
        Ok(())
    }
}

impl Read for Stream {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Stream {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }

    /// TLS: send the records rustls still holds (WouldBlock while the socket is full).
    #[inline]
    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(_) => Ok(()),
            Stream::Tls(t) => t.push(),
        }
    }
}

pub struct TlsStream {
    tcp: TcpStream,
    tls: ClientConnection,
}

impl TlsStream {
    fn push(&mut self) -> std::io::Result<()> {
        while self.tls.wants_write() {
            self.tls.write_tls(&mut self.tcp)?;
        }
        Ok(())
    }

    /// Handshake replies, and request bytes held until the keys were ready, go out as soon as
    /// records arrive; a full socket leaves them to the next write or the request's deadline.
    fn push_now(&mut self) -> std::io::Result<()> {
        match self.push() {
            Err(e) if e.kind() != ErrorKind::WouldBlock => Err(e),
            _ => Ok(()),
        }
    }
}

impl Read for TlsStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.tls.reader().read(buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                other => return other,
            }
            let n = self.tls.read_tls(&mut self.tcp)?;
            if let Err(e) = self.tls.process_new_packets() {
                let _ = self.push(); // the alert that says why
                return Err(fault(e));
            }
            self.push_now()?;
            if n == 0 {
                // Closed without close_notify: an end of stream as on a plain connection
                // (the reply parser tells a whole reply from a truncated one).
                return match self.tls.reader().read(buf) {
                    Err(e) if matches!(e.kind(), ErrorKind::UnexpectedEof | ErrorKind::WouldBlock) => Ok(0),
                    other => other,
                };
            }
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.push()?;
        // Zero: rustls's buffer is full of bytes waiting for the handshake.
        match self.tls.writer().write(buf)? {
            0 => Err(ErrorKind::WouldBlock.into()),
            n => {
                self.push_now()?;
                Ok(n)
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.push()
    }
}

/// complete_io's error (it has sent the alert already): a TLS one as its fault kind.
fn rustls_io(e: std::io::Error) -> std::io::Error {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(inner) => fault(inner.clone()),
        None => e,
    }
}

/// A TLS error as an io::Error whose message is the fault kind (io_kind passes it on).
fn fault(e: rustls::Error) -> std::io::Error {
    let kind = match e {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => "tls_bad_certificate_unknown_issuer".into(),
        rustls::Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }) => {
            "tls_bad_certificate_wrong_name".into()
        }
        rustls::Error::InvalidCertificate(CertificateError::Expired | CertificateError::ExpiredContext { .. }) => "tls_bad_certificate_expired".into(),
        rustls::Error::InvalidCertificate(_) => "tls_bad_certificate".into(),
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => "tls_not_tls".into(),
        rustls::Error::AlertReceived(alert) => format!("tls_alert_{}", format!("{alert:?}").to_lowercase()),
        _ => "tls_error".into(),
    };
    std::io::Error::other(kind)
}
