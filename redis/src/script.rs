//! Running one of the Lua scripts: one round trip per call once Redis has the script cached.

use std::sync::LazyLock;

use redis::{Cmd, ConnectionLike, Value};

use crate::error::Error;

/// A script text and its SHA-1, computed once.
#[derive(Debug)]
pub(crate) struct LuaScript {
    text: &'static str,
    sha: String,
}

impl LuaScript {
    fn new(text: &'static str) -> LuaScript {
        LuaScript { text, sha: redis::Script::new(text).get_hash().to_owned() }
    }

    /// `EVALSHA sha 1 key args...`, or with `EVAL` in place of `EVALSHA sha`.
    fn command(&self, by_sha: bool, key: &str, args: &[Arg<'_>]) -> Cmd {
        let mut cmd = if by_sha { redis::cmd("EVALSHA") } else { redis::cmd("EVAL") };
        cmd.arg(if by_sha { self.sha.as_str() } else { self.text }).arg(1).arg(key);
        for arg in args {
            match arg {
                Arg::Int(n) => cmd.arg(*n),
                Arg::Str(s) => cmd.arg(*s),
                Arg::Owned(s) => cmd.arg(s.as_str()),
                Arg::Empty => cmd.arg(""),
            };
        }
        cmd
    }

    /// Runs the script on `key`: `EVALSHA` (one round trip), and only when Redis answers
    /// `NOSCRIPT` (a fresh server, `SCRIPT FLUSH`, a failover) `EVAL` with the full text,
    /// which also caches it for the next calls.
    fn invoke(
        &self,
        con: &mut dyn ConnectionLike,
        key: &str,
        args: &[Arg<'_>],
    ) -> Result<Value, Error> {
        match self.command(true, key, args).query::<Value>(con) {
            Ok(value) => Ok(value),
            Err(e) if is_noscript(&e) => {
                self.command(false, key, args).query::<Value>(con).map_err(Error::from_redis)
            }
            Err(e) => Err(Error::from_redis(e)),
        }
    }

    /// [`invoke`](Self::invoke) on an async connection.
    #[cfg(feature = "aio")]
    async fn invoke_async(
        &self,
        con: &mut impl redis::aio::ConnectionLike,
        key: &str,
        args: &[Arg<'_>],
    ) -> Result<Value, Error> {
        match self.command(true, key, args).query_async::<Value>(con).await {
            Ok(value) => Ok(value),
            Err(e) if is_noscript(&e) => self
                .command(false, key, args)
                .query_async::<Value>(con)
                .await
                .map_err(Error::from_redis),
            Err(e) => Err(Error::from_redis(e)),
        }
    }

    /// The SHA-1 Redis knows the script by (`EVALSHA`).
    pub(crate) fn sha(&self) -> &str {
        &self.sha
    }
}

fn is_noscript(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript)
}

/// One script call, ready to run on a blocking or (feature `aio`) an async connection: the
/// script, its key, its `ARGV`, and how to read its reply (a function, or for a batch a
/// closure that knows how many replies to expect).
pub(crate) struct Call<'a, T, R = fn(&Value) -> Result<T, Error>> {
    script: &'static LuaScript,
    key: &'a str,
    args: Vec<Arg<'a>>,
    read: R,
    _reads: std::marker::PhantomData<fn() -> T>,
}

impl<'a, T, R: FnOnce(&Value) -> Result<T, Error>> Call<'a, T, R> {
    pub(crate) fn new(script: &'static LuaScript, key: &'a str, args: Vec<Arg<'a>>, read: R) -> Self {
        Call { script, key, args, read, _reads: std::marker::PhantomData }
    }

    /// One round trip on a blocking connection.
    pub(crate) fn run(self, con: &mut dyn ConnectionLike) -> Result<T, Error> {
        (self.read)(&self.script.invoke(con, self.key, &self.args)?)
    }

    /// One round trip on an async connection.
    #[cfg(feature = "aio")]
    pub(crate) async fn run_async(
        self,
        con: &mut impl redis::aio::ConnectionLike,
    ) -> Result<T, Error> {
        (self.read)(&self.script.invoke_async(con, self.key, &self.args).await?)
    }
}

/// One script argument.
#[derive(Debug, Clone)]
pub(crate) enum Arg<'a> {
    Int(u64),
    Str(&'a str),
    Owned(String),
    /// The empty string: "not given" for optional arguments (`now_ns`).
    Empty,
}

impl From<ratelane::server::script::ScriptArg> for Arg<'static> {
    fn from(arg: ratelane::server::script::ScriptArg) -> Arg<'static> {
        use ratelane::server::script::ScriptArg;
        match arg {
            ScriptArg::Int(n) => Arg::Int(n),
            ScriptArg::Text(s) => Arg::Str(s),
            ScriptArg::Empty => Arg::Empty,
        }
    }
}

pub(crate) static GCRA: LazyLock<LuaScript> = LazyLock::new(|| LuaScript::new(crate::GCRA_LUA));
pub(crate) static LEAKY_BUCKET: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(crate::LEAKY_BUCKET_LUA));
pub(crate) static FIXED_WINDOW: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(crate::FIXED_WINDOW_LUA));
pub(crate) static SHARED_STORE: LazyLock<LuaScript> =
    LazyLock::new(|| LuaScript::new(crate::SHARED_STORE_LUA));
