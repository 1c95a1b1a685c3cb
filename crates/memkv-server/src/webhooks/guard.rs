//! Which addresses deliveries may reach: by default only public ones, so that whoever can
//! register an endpoint cannot make the server send requests into its own network (loopback,
//! private, link-local such as a cloud's metadata service, shared, unique-local, multicast,
//! reserved). Checked where the connection is made, on every address a name resolves to (a
//! name that once resolved to a public address and now to a private one is refused), and on an
//! address written in the URL. `serve --webhook-allow-private` lifts it (an endpoint on the
//! same machine or network).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether `ip` is a public unicast address. An IPv6 address that carries an IPv4 address
/// (mapped, compatible, NAT64, 6to4, SIIT, Teredo) is public only if that IPv4 address is: a
/// translator or relay would deliver to it.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6) && embedded_v4(v6).is_none_or(public_v4),
    }
}

/// The IPv4 address an IPv6 address carries, where its prefix says it carries one.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let last32 = || Ipv4Addr::from(u128::from(ip) as u32);
    match s {
        // IPv4-mapped ::ffff:0:0/96, IPv4-compatible ::/96 (deprecated), SIIT's IPv4-translated
        // ::ffff:0:0:0/96, NAT64's well-known 64:ff9b::/96: the last 32 bits.
        [0, 0, 0, 0, 0, 0xffff, ..] | [0, 0, 0, 0, 0, 0, ..] | [0, 0, 0, 0, 0xffff, 0, ..] => {
            Some(last32())
        }
        [0x64, 0xff9b, 0, 0, 0, 0, ..] => Some(last32()),
        // 6to4 2002::/16: the 32 bits after the prefix.
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))),
        // Teredo 2001::/32: the client's address, inverted, in the last 32 bits.
        [0x2001, 0, ..] => Some(Ipv4Addr::from(!(u128::from(ip) as u32))),
        _ => None,
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast()
        || a == 0
        // shared address space (carrier-grade NAT), 100.64.0.0/10
        || (a == 100 && (64..128).contains(&b))
        // IETF protocol assignments, 192.0.0.0/24; benchmarking, 198.18.0.0/15
        || (a == 192 && b == 0 && c == 0)
        || (a == 198 && (18..20).contains(&b))
        // reserved, 240.0.0.0/4
        || a >= 240)
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let [first, second, ..] = ip.segments();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        // unique local fc00::/7, link-local fe80::/10
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
        // documentation 2001:db8::/32
        || (first == 0x2001 && second == 0x0db8)
        // local-use NAT64 64:ff9b:1::/48 (translates into a local network)
        || (first == 0x64 && second == 0xff9b && ip.segments()[2] == 1)
        // discard-only 100::/64
        || ip.segments()[..4] == [0x100, 0, 0, 0])
}

/// The system's resolver, keeping only public addresses.
#[derive(Debug, Clone, Copy)]
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let public: Vec<SocketAddr> = found.filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                return Err(format!(
                    "{host} resolves to no public address (serve --webhook-allow-private allows others)"
                )
                .into());
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// Why `url` may not be delivered to: an address written in it that is not public (names are
/// checked when resolved, by [`PublicOnly`]).
pub fn refused_literal(url: &reqwest::Url) -> Option<String> {
    let host = url.host_str()?;
    let ip: IpAddr = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
        .parse()
        .ok()?;
    (!is_public(ip))
        .then(|| format!("{ip} is not a public address (serve --webhook-allow-private allows it)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_public_unicast_addresses_pass() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "240.0.0.1",
            "192.0.0.8",
            "198.18.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "2001:db8::1",
            // IPv6 forms that carry a private or loopback IPv4 address.
            "::127.0.0.1",
            "::10.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::8.8.8.8",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
            "::ffff:0:127.0.0.1",
            "::ffff:0:10.0.0.1",
            "100::1",
            "2001:0:4136:e378:8000:63bf:80ff:fffe", // Teredo, client 127.0.0.1
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "203.0.114.1",
            "2606:4700::1111",
            "::ffff:8.8.4.4",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "::ffff:0:8.8.8.8",
        ] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn an_address_in_the_url_is_checked_and_a_name_is_left_to_the_resolver() {
        let refused = |u: &str| refused_literal(&reqwest::Url::parse(u).unwrap());
        assert!(refused("http://127.0.0.1:8080/hook").is_some());
        assert!(refused("http://[::1]/hook").is_some());
        assert!(refused("http://169.254.169.254/latest/meta-data").is_some());
        assert!(refused("https://8.8.8.8/hook").is_none());
        assert!(refused("https://hooks.example.com/x").is_none());
    }

    #[tokio::test]
    async fn a_name_of_private_addresses_only_does_not_resolve() {
        let refused = PublicOnly
            .resolve("localhost".parse().unwrap())
            .await
            .err()
            .expect("localhost is loopback only");
        assert!(
            refused.to_string().contains("no public address"),
            "{refused}"
        );
    }
}
