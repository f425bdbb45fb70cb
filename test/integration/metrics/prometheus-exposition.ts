/**
 * A strict reader of the Prometheus text format (0.0.4) for the tests: every line is a HELP/TYPE comment
 * or a `name{labels} value` sample of a declared family; a histogram's buckets are cumulative and end at
 * `+Inf` = `_count`. Throws on anything a Prometheus server would refuse.
 */
export type ParsedSample = { name: string; labels: Record<string, string>; value: number };

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (-?[0-9.eE+-]+|NaN|\+Inf|-Inf)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseExposition(text: string): { types: Map<string, string>; samples: ParsedSample[] } {
  if (!text.endsWith("\n")) throw new Error("the exposition must end with a newline");
  const types = new Map<string, string>();
  const samples: ParsedSample[] = [];
  for (const line of text.slice(0, -1).split("\n")) {
    if (line.startsWith("# HELP ")) continue;
    const type = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (type) {
      if (types.has(type[1]!)) throw new Error(`family ${type[1]} declared twice`);
      types.set(type[1]!, type[2]!);
      continue;
    }
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`unparsable line: ${line}`);
    const name = match[1]!;
    const family = types.has(name) ? name : name.replace(/_(bucket|sum|count)$/, "");
    if (!types.has(family)) throw new Error(`sample ${name} of an undeclared family`);
    const labels: Record<string, string> = {};
    const body = match[3] ?? "";
    const consumed = [...body.matchAll(LABEL)].map((m) => {
      labels[m[1]!] = m[2]!.replace(/\\n/g, "\n").replace(/\\"/g, '"').replace(/\\\\/g, "\\");
      return m[0];
    });
    if (consumed.join(",") !== body) throw new Error(`bad labels: ${body}`);
    samples.push({ name, labels, value: Number(match[4]!.replace("+Inf", "Infinity")) });
  }
  checkHistograms(types, samples);
  return { types, samples };
}

function checkHistograms(types: Map<string, string>, samples: ParsedSample[]): void {
  for (const [family, type] of types) {
    if (type !== "histogram") continue;
    const series = new Map<string, ParsedSample[]>();
    for (const sample of samples.filter((s) => s.name === `${family}_bucket`)) {
      const { le: _le, ...rest } = sample.labels;
      const key = JSON.stringify(rest);
      series.set(key, [...(series.get(key) ?? []), sample]);
    }
    for (const [key, buckets] of series) {
      const values = buckets.map((b) => b.value);
      if (values.some((v, i) => i > 0 && v < values[i - 1]!))
        throw new Error(`${family}${key}: not cumulative`);
      if (buckets.at(-1)?.labels.le !== "+Inf") throw new Error(`${family}${key}: no +Inf bucket`);
      const count = samples.find((s) => s.name === `${family}_count` && JSON.stringify(s.labels) === key);
      if (count?.value !== values.at(-1)) throw new Error(`${family}${key}: +Inf bucket ≠ _count`);
    }
  }
}
