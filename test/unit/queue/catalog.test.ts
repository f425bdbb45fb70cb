import { describe, expect, expectTypeOf, it } from "vitest";
import { jobCatalog, type BerthJobCatalog } from "@/server/queue/catalog";
import type { Enqueue } from "@/server/queue/enqueue";
import { queueNamesOf } from "@/server/queue/queues";
import type { JobPayload, JobPayloadInput, QueueNameOf } from "@/server/queue/types";

describe("job catalog", () => {
  it("types payloads from the schemas: input before defaults, output after", () => {
    expectTypeOf<JobPayloadInput<BerthJobCatalog, "audit.flush">>().toEqualTypeOf<{
      trigger?: "write" | "schedule" | "manual" | undefined;
    }>();
    expectTypeOf<JobPayload<BerthJobCatalog, "audit.flush">>().toEqualTypeOf<{
      trigger: "write" | "schedule" | "manual";
    }>();
    expectTypeOf<"audit">().toExtend<QueueNameOf<BerthJobCatalog>>();
    expectTypeOf<"no-such-queue">().not.toExtend<QueueNameOf<BerthJobCatalog>>();
  });

  it("types enqueue's name and payload from the catalog", () => {
    const typed = (() => Promise.resolve({})) as unknown as Enqueue<BerthJobCatalog>;
    // Compile-time only: these lines are checked by `tsc`, not executed.
    const check = () => {
      void typed("audit.flush", { trigger: "write" });
      // @ts-expect-error -- unknown job name
      void typed("audit.fush", {});
      // @ts-expect-error -- wrong payload type
      void typed("audit.flush", { trigger: "sometimes" });
    };
    expect(typeof check).toBe("function");
  });

  it("validates payloads with defaults and rejects bad ones", () => {
    const schema = jobCatalog["audit.flush"].schema;
    expect(schema.parse({})).toEqual({ trigger: "write" });
    expect(schema.safeParse({ trigger: "sometimes" }).success).toBe(false);
  });

  it("every job has attempts (with a backoff when retried), bounded retention and names BullMQ accepts", () => {
    for (const [name, spec] of Object.entries(jobCatalog)) {
      expect(spec.options.attempts, name).toBeGreaterThanOrEqual(1);
      if ((spec.options.attempts ?? 1) > 1) expect(spec.options.backoff, name).toBeDefined();
      expect(spec.options.removeOnComplete, name).toBeDefined();
      expect(spec.options.removeOnFail, name).toBeDefined();
      expect(spec.queue, name).not.toContain(":");
      expect(name, name).toMatch(/^[a-z]+(\.[a-z-]+)+$/);
    }
    expect(queueNamesOf(jobCatalog)).toContain("audit");
  });
});
