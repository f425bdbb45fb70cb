import type { TStageSampleInput, TStagePath } from "./stage-sample.schema";

/**
 * The API process' half of the stage timings. The provision gate notes which path the workers took (from
 * the job's return value) and when the workspace became READY; the workspace service, when its attach was
 * fresh, records `attach` and arms `first_answer`, which the chat service fires at the turn's first tool
 * result. Process-local and bounded: it only bridges calls within one process.
 */
type PendingProvision = { path: TStagePath; readyAt: number };
type AwaitingAnswer = Omit<TStageSampleInput, "stage" | "durationMs" | "at" | "kind"> & {
  attachedAt: number;
};

const MAX_ENTRIES = 10_000;

export class AttachTracker {
  private readonly provisioned = new Map<string, PendingProvision>();
  private readonly awaiting = new WeakMap<object, AwaitingAnswer>();

  constructor(private readonly record: (samples: TStageSampleInput[]) => void) {}

  /** The gate: the workers provisioned `workspaceId` through `path` (job return value). */
  noteProvisioned(workspaceId: string, provision: PendingProvision): void {
    if (this.provisioned.size >= MAX_ENTRIES) this.provisioned.delete(this.provisioned.keys().next().value!);
    this.provisioned.set(workspaceId, provision);
  }

  /**
   * The workspace service after a fresh attach (this process had no live handle): records `attach` from
   * READY (or from the call's start, for a reattach to a READY record) and waits for the first answer.
   */
  attached(
    workspace: object,
    facts: {
      tenantId: string;
      workspaceId: string;
      backend: string;
      requestedAt: number;
      attachedAt: number;
    },
  ): void {
    if (this.awaiting.has(workspace)) return; // two calls raced on one attach: it is measured once
    const provision = this.provisioned.get(facts.workspaceId);
    this.provisioned.delete(facts.workspaceId);
    const path: TStagePath = provision?.path ?? "reattach";
    const from = provision ? Math.max(provision.readyAt, facts.requestedAt) : facts.requestedAt;
    const base = { tenantId: facts.tenantId, workspaceId: facts.workspaceId, backend: facts.backend, path };
    this.record([
      { ...base, kind: "attach", stage: "attach", durationMs: facts.attachedAt - from, at: new Date() },
    ]);
    this.awaiting.set(workspace, { ...base, attachedAt: facts.attachedAt });
  }

  /** The chat service at a tool result: the first one after a fresh attach records `first_answer`. */
  answered(workspace: object, at = Date.now()): void {
    const awaiting = this.awaiting.get(workspace);
    if (!awaiting) return;
    this.awaiting.delete(workspace);
    const { attachedAt, ...base } = awaiting;
    this.record([
      { ...base, kind: "attach", stage: "first_answer", durationMs: at - attachedAt, at: new Date(at) },
    ]);
  }
}
