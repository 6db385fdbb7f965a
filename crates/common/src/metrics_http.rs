//! The one small HTTP endpoint behind both `/metrics` listeners (the
//! broker's `--metrics-listen` and the runtime's `metrics.listen`): `GET
//! /metrics` answers what a render function returns, in Prometheus text
//! format (0.0.4). One request per connection, request head bounded to
//! 8 KiB, 5 s per connection; any other path gets 404, anything else 400.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What produces the exposition text, called once per scrape.
pub type Render = Arc<dyn Fn() -> String + Send + Sync>;

/// Largest request head read.
const MAX_HEAD: usize = 8192;
/// Time a connection may take.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// Binds the listener.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves `GET /metrics` from `listener` until `shutdown` changes.
pub async fn serve(listener: TcpListener, render: Render, mut shutdown: watch::Receiver<bool>) {
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(_) => continue,
            },
            _ = shutdown.changed() => return,
        };
        let render = render.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, answer(stream, &*render)).await;
        });
    }
}

async fn answer(
    mut stream: TcpStream,
    render: &(dyn Fn() -> String + Send + Sync),
) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.len() > MAX_HEAD {
            return respond(&mut stream, "400 Bad Request", "request too large\n").await;
        }
    }
    let line = buf.split(|b| *b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some("GET"), Some("/metrics")) => respond(&mut stream, "200 OK", &render()).await,
        (Some("GET"), Some(_)) => respond(&mut stream, "404 Not Found", "try /metrics\n").await,
        _ => respond(&mut stream, "400 Bad Request", "GET /metrics only\n").await,
    }
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: SocketAddr, request: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(request).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        out
    }

    #[tokio::test]
    async fn serves_metrics_404_and_400() {
        let l = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = l.local_addr().unwrap();
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(serve(l, Arc::new(|| "m 1\n".to_string()), rx));
        let ok = get(addr, b"GET /metrics HTTP/1.1\r\n\r\n").await;
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        assert!(
            ok.contains("Content-Length: 4") && ok.ends_with("m 1\n"),
            "{ok}"
        );
        let nf = get(addr, b"GET /x HTTP/1.1\r\n\r\n").await;
        assert!(nf.starts_with("HTTP/1.1 404"), "{nf}");
        let bad = get(addr, b"POST /metrics HTTP/1.1\r\n\r\n").await;
        assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
        tx.send(true).unwrap();
        task.await.unwrap();
    }
}
