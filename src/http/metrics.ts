/**
 * GET /metrics: this process's counters in Prometheus' text format. They hold no tenant
 * data (totals only), so the endpoint needs no API key; keep it off the public edge all the same.
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
  };
  sendBuffers: { readonly held: number };
}

export function metricsOf({ appends: appended, live, sendBuffers }: MetricSources) {
  return () => {
    const { appends, conflicts, batches } = appended;
    const failures = Object.entries(live.poller.failures);
    return render([
      { name: 'runplane_event_appends_total', help: 'Events appended by this process.', type: 'counter', samples: [[undefined, appends]] },
      {
        name: 'runplane_event_append_conflicts_total',
        help: 'Appends that found their seq taken (conditional-check failures) and tried again or were refused.',
        type: 'counter',
        samples: [[undefined, conflicts]],
      },
      {
        name: 'runplane_event_group_commits_total',
        help: 'Transactions that wrote more than one concurrent append to a run together.',
        type: 'counter',
        samples: [[undefined, batches]],
      },
      {
        name: 'runplane_subscriptions_open',
        help: 'Subscriptions being served now.',
        type: 'gauge',
        samples: [[undefined, live.openSubscriptions]],
      },
      {
        name: 'runplane_subscriptions_lagging',
        help: 'Event subscriptions whose client fell behind: they read from the table until it catches up.',
        type: 'gauge',
        samples: [[undefined, live.laggingFeeds]],
      },
      {
        name: 'runplane_send_buffered_bytes',
        help: "Bytes held for subscribers: events queued and frames not yet taken by the client (each connection's share bounded by RUNPLANE_SEND_BUFFER_BYTES).",
        type: 'gauge',
        samples: [[undefined, sendBuffers.held]],
      },
      {
        name: 'runplane_stream_get_records_total',
        help: 'GetRecords calls made by the stream poller.',
        type: 'counter',
        samples: [[undefined, live.poller.getRecordsCalls]],
      },
      {
        name: 'runplane_stream_failures_total',
        help: 'Stream poller failures, by error name.',
        type: 'counter',
        samples: failures.length > 0 ? failures.map(([error, n]) => [{ error }, n]) : [[undefined, 0]],
      },
      {
        name: 'runplane_process_resident_memory_bytes',
        help: 'Resident set size of the server process.',
        type: 'gauge',
        samples: [[undefined, process.memoryUsage.rss()]],
      },
      {
        name: 'runplane_process_heap_used_bytes',
        help: 'JavaScript heap in use by the server process.',
        type: 'gauge',
        samples: [[undefined, process.memoryUsage().heapUsed]],
      },
    ]);
  };
}
