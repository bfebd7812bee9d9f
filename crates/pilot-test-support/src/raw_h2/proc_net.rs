//! Whether a process still holds a TCP connection, read from Linux's
//! `/proc/net/tcp`: a socket some process holds has an inode; one whose
//! process closed it (an orphan the kernel is still finishing, or in
//! TIME_WAIT) has inode 0 or is gone.

use std::net::{IpAddr, SocketAddr};

/// Whether the end of the connection at `server` (whose peer is `client`)
/// is still an open socket of some process.
pub(crate) fn held(server: SocketAddr, client: SocketAddr) -> bool {
    let (table, local, remote) = match (server.ip(), client.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => ("/proc/net/tcp", hex(server), hex(client)),
        _ => ("/proc/net/tcp6", hex(server), hex(client)),
    };
    let Ok(text) = std::fs::read_to_string(table) else {
        return false;
    };
    text.lines().skip(1).any(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        fields.len() > 9
            && fields[1].eq_ignore_ascii_case(&local)
            && fields[2].eq_ignore_ascii_case(&remote)
            && fields[9] != "0"
    })
}

/// An address as `/proc/net/tcp` prints it: the address's bytes as the
/// kernel's native-endian words, a colon, the port in hexadecimal.
fn hex(address: SocketAddr) -> String {
    let ip = match address.ip() {
        IpAddr::V4(v4) => format!("{:08X}", u32::from_ne_bytes(v4.octets())),
        IpAddr::V6(v6) => v6
            .octets()
            .chunks_exact(4)
            .map(|word| format!("{:08X}", u32::from_ne_bytes([word[0], word[1], word[2], word[3]])))
            .collect(),
    };
    format!("{ip}:{:04X}", address.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_connection_is_held_and_a_closed_one_is_not() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let server = listener.local_addr().unwrap();
        let client = std::net::TcpStream::connect(server).unwrap();
        let (accepted, _) = listener.accept().unwrap();
        let client_addr = client.local_addr().unwrap();
        assert!(held(server, client_addr));
        drop(accepted);
        assert!(!held(server, client_addr));
    }
}
