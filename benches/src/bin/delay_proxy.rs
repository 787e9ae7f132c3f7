//! A TCP proxy on loopback that adds network latency, for the remote benchmark
//! (`benches/remote_compare.py`) on machines whose kernel has no `netem`.
//!
//! Every segment read from one side is written to the other half a round trip later, in order,
//! without holding back the segments behind it (a link's delay, not a per-request pause: many
//! requests on many connections overlap as they would over a WAN). A new connection pays one
//! round trip before its first byte goes through, as a TCP handshake would.
//!
//! Usage: `delay_proxy PORT_FILE UPSTREAM_HOST:PORT RTT_MS` — binds 127.0.0.1 on a free port,
//! writes it to PORT_FILE, and serves until killed.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, port_file, upstream, rtt_ms] = args.as_slice() else {
        eprintln!("usage: delay_proxy PORT_FILE UPSTREAM_HOST:PORT RTT_MS");
        std::process::exit(2);
    };
    let rtt = match rtt_ms.parse::<f64>() {
        Ok(ms) if ms.is_finite() && (0.0..=60_000.0).contains(&ms) => {
            Duration::from_secs_f64(ms / 1000.0)
        }
        _ => {
            eprintln!(
                "delay_proxy: RTT_MS must be a number of milliseconds in 0..=60000, not {rtt_ms:?}"
            );
            std::process::exit(2)
        }
    };
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    std::fs::write(port_file, listener.local_addr()?.port().to_string())?;
    loop {
        let (client, _) = listener.accept().await?;
        let upstream = upstream.clone();
        tokio::spawn(async move {
            if let Ok(server) = TcpStream::connect(&upstream).await {
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                tokio::time::sleep(rtt).await; // the handshake's round trip
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::join!(
                    pipe(client_read, server_write, rtt / 2),
                    pipe(server_read, client_write, rtt / 2)
                );
            }
        });
    }
}

/// Copy `from` to `to`, each segment `delay` after it was read.
async fn pipe(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, delay: Duration) {
    // Bounded: a slow reader holds back the sender, as TCP's window would.
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(256);
    let reader = async move {
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}
