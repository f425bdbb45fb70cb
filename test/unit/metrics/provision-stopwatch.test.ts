import { describe, expect, it } from "vitest";
import { ProvisionStopwatch, provisionPathOf } from "@/server/modules/metrics/provision-stopwatch";

const facts = { tenantId: "t1", workspaceId: "w1", backend: "docker", path: "cold" as const };
const durations = (samples: { stage: string; durationMs: number }[]) =>
  Object.fromEntries(samples.map((s) => [s.stage, s.durationMs]));

describe("ProvisionStopwatch", () => {
  it("splits a provision into queued → machine → gateway and a total from the request", () => {
    const watch = new ProvisionStopwatch(1_000, 1_250);
    watch.progress("image.building", 1_300);
    watch.progress("container.created", 3_250);
    watch.progress("gateway.starting", 3_300); // the machine was already created: the first mark counts
    watch.progress("gateway.ready", 4_000);
    expect(durations(watch.samples({ ...facts, ok: true, endedAt: 4_100 }))).toEqual({
      queued: 250,
      machine: 2_000,
      gateway: 750,
      total: 3_100,
    });
  });

  it("ends the machine stage when provision returns on a backend without a gateway", () => {
    const watch = new ProvisionStopwatch(0, 100);
    expect(durations(watch.samples({ ...facts, ok: true, endedAt: 900 }))).toEqual({
      queued: 100,
      machine: 800,
      total: 900,
    });
  });

  it("records only queued and total for a failed provision, marked not ok", () => {
    const watch = new ProvisionStopwatch(0, 10);
    watch.progress("container.created", 50);
    const samples = watch.samples({ ...facts, ok: false, endedAt: 70 });
    expect(durations(samples)).toEqual({ queued: 10, total: 70 });
    expect(samples.every((s) => s.ok === false)).toBe(true);
  });
});

describe("provisionPathOf", () => {
  it("names the path from the state the job found", () => {
    expect(provisionPathOf("PENDING", false)).toBe("cold");
    expect(provisionPathOf("PURGED", false)).toBe("cold");
    expect(provisionPathOf("STOPPED", true)).toBe("resume");
    expect(provisionPathOf("READY", true)).toBe("replaced");
    expect(provisionPathOf("FAILED", true)).toBe("replaced");
    expect(provisionPathOf("FAILED", false)).toBe("cold");
    expect(provisionPathOf("PROVISIONING", true)).toBe("resume");
    expect(provisionPathOf("PROVISIONING", false)).toBe("cold");
  });
});
