//! A connection wrapper that counts round trips: each call that writes commands and reads
//! their replies is one round trip, however many commands it carries (a pipeline is one).

use redis::{ConnectionLike, RedisResult, Value};

/// `inner`, counting its round trips.
#[derive(Debug)]
pub struct CountingConnection<C> {
    pub inner: C,
    pub round_trips: u64,
}

impl<C> CountingConnection<C> {
    pub fn new(inner: C) -> Self {
        CountingConnection { inner, round_trips: 0 }
    }
}

impl<C: ConnectionLike> ConnectionLike for CountingConnection<C> {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.round_trips += 1;
        self.inner.req_packed_command(cmd)
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.round_trips += 1;
        self.inner.req_packed_commands(cmd, offset, count)
    }

    fn get_db(&self) -> i64 {
        self.inner.get_db()
    }

    fn check_connection(&mut self) -> bool {
        self.inner.check_connection()
    }

    fn is_open(&self) -> bool {
        self.inner.is_open()
    }
}
