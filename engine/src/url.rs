//! Splitting an http:// or https:// URL: a leaf that the spec (to check a target's URL) and the
//! HTTP target (to connect) both use, so the spec depends on no target implementation.

use anyhow::{anyhow, bail};

/// How an https:// URL's server is verified: `?ca=FILE` (a PEM CA bundle) or `?insecure=1`.
#[derive(Debug, PartialEq)]
pub enum TlsCheck {
    Ca(String),
    Insecure,
}

/// Split `http://host[:port]/path` or `https://host[:port]/path?ca=FILE` into
/// (host:port, path ending in '/', how TLS verifies the server when https).
pub fn split_url(url: &str) -> anyhow::Result<(String, String, Option<TlsCheck>)> {
    let (rest, port, https) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (rest, 80, false),
        (_, Some(rest)) => (rest, 443, true),
        _ => bail!("{url}: only http:// and https:// URLs are supported"),
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() {
        bail!("{url}: no host");
    }
    let has_port = match authority.rfind(']') {
        Some(close) => authority[close..].contains(':'),
        None => authority.contains(':'),
    };
    let authority = if has_port { authority.to_string() } else { format!("{authority}:{port}") };
    let mut base = path.split(['?', '#']).next().unwrap_or("/").to_string();
    if !base.ends_with('/') {
        base.push('/');
    }
    let tls = if https { Some(tls_check(url, path)?) } else { None };
    Ok((authority, base, tls))
}

/// The query of an https:// URL: exactly one of ca=FILE and insecure=1.
fn tls_check(url: &str, path: &str) -> anyhow::Result<TlsCheck> {
    let query = path.split('#').next().unwrap_or("").split_once('?').map_or("", |(_, q)| q);
    let mut check = None;
    for option in query.split('&').filter(|o| !o.is_empty()) {
        let given = match option.split_once('=') {
            Some(("ca", file)) if !file.is_empty() => TlsCheck::Ca(file.to_string()),
            Some(("insecure", "1")) => TlsCheck::Insecure,
            _ => bail!("{url}: unknown option {option:?} (https:// takes ca=FILE or insecure=1)"),
        };
        if check.replace(given).is_some() {
            bail!("{url}: give one of ca=FILE and insecure=1");
        }
    }
    check.ok_or_else(|| anyhow!("{url}: https:// needs ca=FILE (a PEM CA bundle to verify the server against) or insecure=1 (no verification)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_authority_and_base() {
        assert_eq!(split_url("http://127.0.0.1:8080/").unwrap(), ("127.0.0.1:8080".into(), "/".into(), None));
        assert_eq!(split_url("http://example:81/a/b").unwrap(), ("example:81".into(), "/a/b/".into(), None));
        assert_eq!(split_url("http://h").unwrap(), ("h:80".into(), "/".into(), None));
        assert_eq!(split_url("http://[::1]:9/x/?q").unwrap(), ("[::1]:9".into(), "/x/".into(), None));
        assert_eq!(split_url("http://[::1]/").unwrap(), ("[::1]:80".into(), "/".into(), None));
        assert!(split_url("http:///x").is_err());
        assert!(split_url("ftp://h/").is_err());
    }

    #[test]
    fn https_urls_say_how_the_server_is_verified() {
        assert_eq!(split_url("https://h/a?ca=/c.pem").unwrap(), ("h:443".into(), "/a/".into(), Some(TlsCheck::Ca("/c.pem".into()))));
        assert_eq!(split_url("https://h:8443/?insecure=1").unwrap().2, Some(TlsCheck::Insecure));
        assert!(split_url("https://h/").unwrap_err().to_string().contains("needs ca=FILE"));
        assert!(split_url("https://h/?insecure=yes").unwrap_err().to_string().contains("unknown option"));
        assert!(split_url("https://h/?ca=x&insecure=1").is_err());
    }
}
