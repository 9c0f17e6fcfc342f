extension DemoCommand {
    /// What `cache-demo --help` prints.
    static let usage = """
    usage: cache-demo [--store STORE] [--svg PATH]
                                           walk through miss, fresh, stale, refresh and expiry
                                           against an embedded local origin; ends with what
                                           happened, counted, and the cache's statistics
           cache-demo fetch URL [options]  fetch URL through the cache; a path alone (/search)
                                           is fetched from an embedded local origin that
                                           answers any method with what it received
           cache-demo explain URL [options]
                                           what the cache would do with a GET for URL, and why:
                                           the key, the stored entry, its age and lifetime, the
                                           policy and windows, whether it would be stored, the
                                           Cache-Status it would carry; no network
           cache-demo stats [--store STORE] [--json]
                                           what a store holds: entries, bytes, the oldest and
                                           newest entry (URL and when stored); reads the store
                                           only, no network
           cache-demo --help

    --store STORE         memory (the default), disk (under ~/.cache/swift-http-caching),
                          disk:PATH, redis://[user:password@]host:port[/db], a Redis
                          Cluster: redis-cluster://[user:password@]host:port[,host:port...],
                          or a primary found through Redis Sentinel (sentinels without a
                          password): redis-sentinel://[user:password@]host:port[,host:port...][/db]#mastername
                          (keys under cache-demo:, shared by every process using that server
                          or cluster); rediss:// and rediss-cluster:// for TLS, with
                          ?cacert=PATH for a private CA; a second run with a disk or Redis
                          store is answered from the first run's entries
    --svg PATH            (walkthrough) also write the walkthrough as an SVG timeline: each
                          request a mark coloured and labelled by how it was served, its
                          latency, the fresh and usable windows after each store, origin
                          requests and background refreshes

    fetch options:
      --fresh SECONDS     fresh window: served with no network (default 60; may be fractional)
      --usable SECONDS    usable window: served, then refreshed in the background
                          (default 172800, two days)
      --repeat N          how many times to send the request, or every body in turn
                          (default 1)
      --interval SECONDS  pause between requests (default 0)
      --policy NAME       two-tier (default), http, cache-first, cache-only or network-only
      --store STORE       as above
      -X, --request METHOD
                          the method (default GET, or POST with a body, as curl does);
                          -X QUERY --data BODY sends a QUERY, cached under its body
      -H, --header 'N: V' a request header field (repeatable)
      --data STRING       a request body, sent as given (a leading @ is not a file name);
                          repeat it to send one request per body, in turn (curl would join
                          them with &): --data A --data A --data B is a miss, a hit, a miss
      --data-file PATH    a request body read from a file (repeatable, as --data; not
                          together with --data); a file that cannot be read exits 2
                          a body goes with Content-Type: application/x-www-form-urlencoded
                          unless -H gives one, as curl sends it; the type is part of the key
      --key-body          key each request by its body (URLRequest.keysBody), so a POST is
                          cached (never revalidated: only QUERY is); QUERY needs no flag
      --partial           store 206 answers as parts and combine them (storesPartialContent);
                          the embedded origin then serves a 64 KiB file with ranges:
                          -H 'Range: bytes=0-99' asks for one
      --json              one JSON object per request and per event, instead of a table
      --stats[=FORMAT]    at the end, the cache's statistics: a table (FORMAT table, the
                          default), or the Prometheus text format (FORMAT prometheus); with
                          --json, one line {"stats":{...}} (requests by status, hit_ratio,
                          origin_requests, bytes, stored, not_stored by reason, refreshes,
                          the store's entries and bytes)

    explain options (and --fresh, --usable and --policy as above):
      --store STORE       the store to read; explain fetches nothing, so with the default
                          memory store nothing is stored unless --fetch-first is given:
                          `cache-demo fetch URL --store disk` then
                          `cache-demo explain URL --store disk` explains the stored entry
      --fetch-first       fetch URL once through the cache first, then explain
      --header 'N: V'     a request header field (repeatable), e.g. for Vary or credentials;
                          -H works too
      --json              the explanation as one JSON object

    how each request was served: miss, fresh, stale, expired, revalidated, fallback, bypass
    exit status: 0 success, 1 a request failed (or a store could not be opened), 2 a bad
    command line or a --data-file that cannot be read
    """
}
