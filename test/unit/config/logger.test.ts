import { Writable } from "node:stream";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { REDACT_PATHS, withContext } from "@/server/logger";

function capture(): { log: pino.Logger; lines: () => Record<string, unknown>[] } {
  const chunks: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const log = pino({ level: "info", redact: { paths: REDACT_PATHS, censor: "[redacted]" } }, sink);
  return { log, lines: () => chunks.map((c) => JSON.parse(c) as Record<string, unknown>) };
}

describe("logger", () => {
  it("redacts secrets at the top level and nested, keeping other fields", () => {
    const { log, lines } = capture();
    log.info(
      {
        password: "p",
        agent: { apiKey: "k", name: "ok" },
        req: { headers: { authorization: "Bearer t", cookie: "c" } },
      },
      "x",
    );
    const [line] = lines();
    expect(line).toMatchObject({
      password: "[redacted]",
      agent: { apiKey: "[redacted]", name: "ok" },
      req: { headers: { authorization: "[redacted]", cookie: "[redacted]" } },
    });
    expect(JSON.stringify(line)).not.toMatch(/Bearer t|"k"|"p"/);
  });

  it("binds request, tenant and job ids on child loggers", () => {
    const { log, lines } = capture();
    withContext(log, { requestId: "r1", tenantId: "t1", jobId: "j1" }).info("hello");
    expect(lines()[0]).toMatchObject({ requestId: "r1", tenantId: "t1", jobId: "j1", msg: "hello" });
  });
});
