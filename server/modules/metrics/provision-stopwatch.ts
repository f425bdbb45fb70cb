import type { TStageSampleInput, TStagePath } from "./stage-sample.schema";

/** Progress steps that mean "the machine exists now" (the gateway may still be starting in it). */
const MACHINE_CREATED =
  /^(container\.(created|reattached)|pod\.created|sandbox\.created|gateway\.starting|pool\.bound)$/;
const GATEWAY_READY = /^gateway\.ready$/;

/**
 * The marks of one provision job, turned into stage samples: requested (the job's enqueue time) → picked up
 * (the worker started it) → machine created → gateway ready (from the driver's progress steps; a backend
 * without a gateway, such as the confined local one, has the machine ready when `provision` returns) → READY.
 */
export class ProvisionStopwatch {
  private machineAt: number | null = null;
  private gatewayAt: number | null = null;

  constructor(
    private readonly requestedAt: number,
    private readonly pickedUpAt: number,
  ) {}

  progress(step: string, at = Date.now()): void {
    if (this.machineAt === null && MACHINE_CREATED.test(step)) this.machineAt = at;
    if (GATEWAY_READY.test(step)) {
      this.gatewayAt = at;
      this.machineAt ??= at;
    }
  }

  samples(facts: {
    tenantId: string;
    workspaceId: string;
    backend: string;
    path: TStagePath;
    ok: boolean;
    endedAt?: number;
  }): TStageSampleInput[] {
    const endedAt = facts.endedAt ?? Date.now();
    const base = {
      tenantId: facts.tenantId,
      workspaceId: facts.workspaceId,
      kind: "provision" as const,
      backend: facts.backend,
      path: facts.path,
      ok: facts.ok,
      at: new Date(endedAt),
    };
    const samples: TStageSampleInput[] = [
      { ...base, stage: "queued", durationMs: this.pickedUpAt - this.requestedAt },
    ];
    // A failed provision says how long it took to fail, not stage durations it never reached.
    if (facts.ok) {
      const machineAt = this.machineAt ?? endedAt;
      samples.push({ ...base, stage: "machine", durationMs: machineAt - this.pickedUpAt });
      if (this.gatewayAt !== null) {
        samples.push({ ...base, stage: "gateway", durationMs: this.gatewayAt - machineAt });
      }
    }
    samples.push({ ...base, stage: "total", durationMs: endedAt - this.requestedAt });
    return samples;
  }
}

/** Which path a provision takes, from the record's state when the job found it. */
export function provisionPathOf(state: string, hasHandle: boolean): TStagePath {
  switch (state) {
    case "STOPPED":
      return "resume";
    case "READY": // the machine vanished under a READY record
      return "replaced";
    case "FAILED": // a machine that ran and died is replaced; one that never came up is still a cold start
      return hasHandle ? "replaced" : "cold";
    case "PROVISIONING": // the retry of an interrupted attempt
      return hasHandle ? "resume" : "cold";
    default: // PENDING, PURGED (a fresh generation)
      return "cold";
  }
}
