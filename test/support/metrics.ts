/** A server's GET /metrics read back as numbers. */

/** Every sample by name (and labels, as printed: `name{shard="..."}`). */
export async function readMetrics(url: string): Promise<Map<string, number>> {
  const text = await (await fetch(new URL('/metrics', url))).text();
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
