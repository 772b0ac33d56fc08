/**
 * GET /metrics: this process's counters in Prometheus' text format. They hold no tenant
 * data (totals, and tenants by name only where a shared pool is cut per tenant), so the
 * endpoint needs no API key; keep it off the public edge all the same.
 */

interface Metric {
  name: string;
  help: string;
  type: 'counter' | 'gauge';
  samples: Array<[labels: Record<string, string> | undefined, value: number]>;
}

const escapeLabel = (value: string) => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

function render(metrics: Metric[]) {
  const lines: string[] = [];
  for (const { name, help, type, samples } of metrics) {
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [labels, value] of samples) {
      const text = labels
        ? `{${Object.entries(labels)
            .map(([k, v]) => `${k}="${escapeLabel(v)}"`)
            .join(',')}}`
        : '';
      lines.push(`${name}${text} ${value}`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/** What the counters are read from (the composition root hands them in). */
export interface MetricSources {
  appends: { readonly appends: number; readonly conflicts: number; readonly batches: number };
  live: {
    readonly openSubscriptions: number;
    readonly laggingFeeds: number;
    readonly poller: { readonly getRecordsCalls: number; readonly failures: Readonly<Record<string, number>> };
    /** Present when replicas share the table through Redis. */
    readonly replicas?: {
      readonly ownership: { readonly owned: string[]; checkpointLag(): Array<{ shard: string; records: number; seconds: number }> };
      readonly fanout: {
        readonly counts: { published: number; unsent: number; consumed: number; resyncs: number; lagMs: number; gaps: number };
        readonly dropped: Readonly<Record<string, number>>;
        /** Changes sent as notices: by tenant (undefined: tenants no longer named) and why. */
        readonly notices: { samples(): Array<[tenant: string | undefined, reason: string, count: number]> };
        readonly degraded: string | undefined;
        readonly sendsInFlight: number;
      };
    };
  };
  sendBuffers: { readonly held: number };
  documents: { readonly bytes: number; readonly size: number; readonly counts: { readonly evictions: number } };
  stalls: { readonly stalled: number };
  /** Table reads in flight for requests and feeds (shared fairly between tenants), and those refused for a tenant's full queue. */
  reads: { inFlightOf(): number; readonly refused: number };
  /** The cost of the queries and mutations executing now, and those refused for a tenant's full queue. */
  executing: { takenBy(): number; readonly refused: number };
  /** Request bodies being read now (bytes), and requests refused for a tenant's full queue. */
  bodies: { takenBy(): number; readonly refused: number };
  /** Live output waiting to be stored. */
  output: { stats(): { streams: number; waitingBytes: number } };
  /** Throughput throttles of this process's writes, by operation: each one, and those that reached the caller. */
  throttles: { readonly throttled: Readonly<Record<string, number>>; readonly refused: Readonly<Record<string, number>> };
}

/** One sample per operation, or a single 0 before any (the series exists from the start). */
/** A metric of one sample, without labels. */
const gauge = (name: string, help: string, value: number): Metric => ({ name, help, type: 'gauge', samples: [[undefined, value]] });
const counter = (name: string, help: string, value: number): Metric => ({ name, help, type: 'counter', samples: [[undefined, value]] });

const byOperation = (counts: Readonly<Record<string, number>>): Metric['samples'] => {
  const entries = Object.entries(counts);
  return entries.length > 0 ? entries.map(([operation, n]) => [{ operation }, n]) : [[undefined, 0]];
};

export function metricsOf({
  appends: appended,
  live,
  sendBuffers,
  documents,
  stalls,
  throttles,
  reads,
  executing,
  bodies,
  output,
}: MetricSources) {
  return () => {
    const { appends, conflicts, batches } = appended;
    const failures = Object.entries(live.poller.failures);
    return render([
      { name: 'runplane_event_appends_total', help: 'Events appended by this process.', type: 'counter', samples: [[undefined, appends]] },
      counter(
        'runplane_event_append_conflicts_total',
        'Appends that found their seq taken (conditional-check failures) and tried again or were refused.',
        conflicts,
      ),
      counter('runplane_event_group_commits_total', 'Transactions that wrote more than one concurrent append to a run together.', batches),
      {
        name: 'runplane_dynamodb_throttles_total',
        help: 'Writes DynamoDB refused for throughput (a partition past its units), by operation; each was retried with back-off.',
        type: 'counter',
        samples: byOperation(throttles.throttled),
      },
      {
        name: 'runplane_dynamodb_throttled_refusals_total',
        help: 'Operations answered THROTTLED (retryable) because their partition stayed past its throughput through every retry, by operation.',
        type: 'counter',
        samples: byOperation(throttles.refused),
      },
      counter(
        'runplane_runs_stalled_total',
        "Claimed runs this process's stall watcher found with their claim run out, and moved to STALLED.",
        stalls.stalled,
      ),
      gauge('runplane_documents_cached', 'Parsed documents kept for reuse.', documents.size),
      gauge(
        'runplane_documents_cached_bytes',
        'Heap the kept documents hold (estimated from their text; bounded by RUNPLANE_DOCUMENT_CACHE_BYTES).',
        documents.bytes,
      ),
      counter(
        'runplane_document_evictions_total',
        'Documents dropped to stay within the bound or a tenant within its share.',
        documents.counts.evictions,
      ),
      gauge(
        'runplane_table_reads_in_flight',
        "Table reads of requests and feeds in flight (at most RUNPLANE_READS_IN_FLIGHT, a tenant's at most RUNPLANE_TENANT_READS_IN_FLIGHT).",
        reads.inFlightOf(),
      ),
      counter(
        'runplane_table_reads_refused_total',
        'Table reads refused because their tenant had too many waiting (UNAVAILABLE, retryable).',
        reads.refused,
      ),
      gauge(
        'runplane_operations_executing_cost',
        "The cost of the queries and mutations executing now (at most RUNPLANE_COST_IN_FLIGHT, a tenant's at most RUNPLANE_TENANT_COST_IN_FLIGHT).",
        executing.takenBy(),
      ),
      counter(
        'runplane_operations_refused_total',
        'Queries and mutations refused because their tenant had too many waiting to execute (RATE_LIMITED).',
        executing.refused,
      ),
      gauge(
        'runplane_body_bytes_in_flight',
        "Request bodies being read now, in bytes (at most RUNPLANE_BODY_BYTES_IN_FLIGHT, a tenant's at most RUNPLANE_TENANT_BODY_BYTES_IN_FLIGHT).",
        bodies.takenBy(),
      ),
      counter(
        'runplane_bodies_refused_total',
        'Requests refused unread because their tenant had too many waiting for their bodies to be read (RATE_LIMITED, retryable).',
        bodies.refused,
      ),
      gauge(
        'runplane_output_waiting_bytes',
        'Live output accepted and not stored yet (a tenant at most a quarter of 64 MiB).',
        output.stats().waitingBytes,
      ),
      gauge('runplane_subscriptions_open', 'Subscriptions being served now.', live.openSubscriptions),
      gauge(
        'runplane_subscriptions_lagging',
        'Event subscriptions whose client fell behind: they read from the table until it catches up.',
        live.laggingFeeds,
      ),
      gauge(
        'runplane_send_buffered_bytes',
        "Bytes held for subscribers: events queued and frames not yet taken by the client (each connection's share bounded by RUNPLANE_SEND_BUFFER_BYTES).",
        sendBuffers.held,
      ),
      counter('runplane_stream_get_records_total', 'GetRecords calls made by the stream poller.', live.poller.getRecordsCalls),
      counter(
        'runplane_stream_getrecords_total',
        'GetRecords calls made by this replica (with replicas: on the shards it holds).',
        live.poller.getRecordsCalls,
      ),
      ...replicaMetrics(live.replicas),
      {
        name: 'runplane_stream_failures_total',
        help: 'Stream poller failures, by error name.',
        type: 'counter',
        samples: failures.length > 0 ? failures.map(([error, n]) => [{ error }, n]) : [[undefined, 0]],
      },
      gauge('runplane_process_resident_memory_bytes', 'Resident set size of the server process.', process.memoryUsage.rss()),
      gauge('runplane_process_heap_used_bytes', 'JavaScript heap in use by the server process.', process.memoryUsage().heapUsed),
    ]);
  };
}

/** Shard ownership and Redis fan-out; one replica alone owns every shard it reads and has no Redis. */
function replicaMetrics(replicas: MetricSources['live']['replicas']): Metric[] {
  const lag = replicas?.ownership.checkpointLag() ?? [];
  const counts = replicas?.fanout.counts ?? { published: 0, unsent: 0, consumed: 0, resyncs: 0, lagMs: 0, gaps: 0 };
  const dropped = Object.entries(replicas?.fanout.dropped ?? {});
  const notices = replicas?.fanout.notices.samples() ?? [];
  return [
    gauge(
      'runplane_stream_shards_owned',
      'Stream shards this replica holds by lease and reads (0 without replicas).',
      replicas?.ownership.owned.length ?? 0,
    ),
    {
      name: 'runplane_stream_checkpoint_lag_records',
      help: 'Per shard held: records handed on since its checkpoint was last written.',
      type: 'gauge',
      samples: lag.map(({ shard, records }) => [{ shard }, records]),
    },
    {
      name: 'runplane_stream_checkpoint_age_seconds',
      help: 'Per shard held: seconds since its checkpoint was last written.',
      type: 'gauge',
      samples: lag.map(({ shard, seconds }) => [{ shard }, seconds]),
    },
    counter('runplane_redis_published_total', 'Changes this replica sent to Redis.', counts.published),
    counter('runplane_redis_unsent_total', 'Changes that could not be sent to Redis (the others re-read from the table).', counts.unsent),
    counter('runplane_redis_consumed_total', "Other replicas' changes read from Redis.", counts.consumed),
    counter(
      'runplane_redis_resyncs_total',
      'Times subscribers re-read from the table because Redis lost or missed changes.',
      counts.resyncs,
    ),
    {
      name: 'runplane_redis_dropped_total',
      help: 'Redis entries dropped unread, by why: not sealed with this table`s RUNPLANE_REDIS_SECRET (unauthenticated), too large, too old (stale), malformed, or repeated.',
      type: 'counter',
      samples: dropped.length > 0 ? dropped.map(([reason, n]) => [{ reason }, n]) : [[undefined, 0]],
    },
    {
      name: 'runplane_redis_notices_total',
      help: "Changes sent through Redis as a notice, by tenant and why: larger than RUNPLANE_REDIS_ENTRY_BYTES (size), or the tenant past its RUNPLANE_REDIS_TENANT_BYTES_PER_SECOND (share); the other replicas' feeds read them from the table. Without a tenant: tenants no longer named (1,000 are at most).",
      type: 'counter',
      samples:
        notices.length > 0
          ? notices.map(([tenant, reason, n]) => [tenant === undefined ? { reason } : { tenant, reason }, n])
          : [[undefined, 0]],
    },
    counter(
      'runplane_redis_gaps_total',
      "Times another replica's entries were found missing (subscribers then re-read from the table).",
      counts.gaps,
    ),
    gauge('runplane_redis_consume_lag_ms', 'Age of the last change read from Redis when it was read.', counts.lagMs),
    gauge('runplane_redis_sends_in_flight', 'Sends to Redis awaiting its answer.', replicas?.fanout.sendsInFlight ?? 0),
    gauge(
      'runplane_redis_degraded',
      '1 while the link to Redis is down, changes went unsent, or a shard reader is not heard from (subscribers are filled from the table meanwhile).',
      replicas?.fanout.degraded ? 1 : 0,
    ),
  ];
}
