/** A server's GET /metrics read back as numbers. */

/** Every sample by name (and labels, as printed: `name{shard="..."}`). */
export async function readMetrics(url: string): Promise<Map<string, number>> {
  const text = await metricsText(url);
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    const match = /^([a-z_]+(?:\{[^}]*\})?) (\S+)$/.exec(line);
    if (match) samples.set(match[1] as string, Number(match[2]));
  }
  return samples;
}

/** One sample; fails naming it when the server does not report it. */
export async function metric(url: string, name: string): Promise<number> {
  const value = (await readMetrics(url)).get(name);
  if (value === undefined) throw new Error(`no ${name} in ${new URL('/metrics', url)}`);
  return value;
}

/**
 * The text of GET /metrics. A server under a test's load may miss a short request deadline or
 * reset a kept-alive connection it is closing: asked again a few times before failing.
 */
async function metricsText(url: string): Promise<string> {
  let last = '';
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const response = await fetch(new URL('/metrics', url));
      if (response.ok) return await response.text();
      last = `HTTP ${response.status}: ${(await response.text()).slice(0, 200)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`GET ${new URL('/metrics', url)} failed 5 times, last: ${last}`);
}
