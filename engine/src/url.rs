//! Splitting an http:// URL: a leaf that the spec (to check a target's URL) and the HTTP target
//! (to connect) both use, so the spec depends on no target implementation.

use anyhow::{anyhow, bail};

/// Split `http://host[:port]/path` into (host:port, path ending in '/').
pub fn split_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url.strip_prefix("http://").ok_or_else(|| anyhow!("{url}: only http:// URLs are supported"))?;
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
    let authority = if has_port { authority.to_string() } else { format!("{authority}:80") };
    let mut base = path.split(['?', '#']).next().unwrap_or("/").to_string();
    if !base.ends_with('/') {
        base.push('/');
    }
    Ok((authority, base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_authority_and_base() {
        assert_eq!(split_url("http://127.0.0.1:8080/").unwrap(), ("127.0.0.1:8080".into(), "/".into()));
        assert_eq!(split_url("http://example:81/a/b").unwrap(), ("example:81".into(), "/a/b/".into()));
        assert_eq!(split_url("http://h").unwrap(), ("h:80".into(), "/".into()));
        assert_eq!(split_url("http://[::1]:9/x/?q").unwrap(), ("[::1]:9".into(), "/x/".into()));
        assert_eq!(split_url("http://[::1]/").unwrap(), ("[::1]:80".into(), "/".into()));
        assert!(split_url("https://h/").is_err());
        assert!(split_url("http:///x").is_err());
    }
}
