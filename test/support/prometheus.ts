/** One sample of a Prometheus text exposition: `name{label="value",…} number`. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** The samples of a `/metrics` body (comments left out). */
export function parseMetrics(body: string): Sample[] {
  return body
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (match === null) throw new Error(`Not a Prometheus sample: ${line}`);
      const labels = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map(([, key, value]) => [key as string, value as string]));
      return { name: match[1] as string, labels, value: Number(match[3]) };
    });
}

/** The value of the sample named `name` whose labels include `labels`; `undefined` when there is none. */
export function valueOf(samples: readonly Sample[], name: string, labels: Readonly<Record<string, string>> = {}): number | undefined {
  return samples.find((sample) => sample.name === name && Object.entries(labels).every(([key, value]) => sample.labels[key] === value))?.value;
}

/** Scrapes `url` with `token` (if any) and parses the answer; throws unless it is 200. */
export async function scrape(url: string, token?: string): Promise<Sample[]> {
  const response = await fetch(url, token === undefined ? {} : { headers: { authorization: `Bearer ${token}` } });
  if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}: ${await response.text()}`);
  return parseMetrics(await response.text());
}
