import type { StageSampleRecorder } from "@/server/modules/metrics/stage-buffer.service";
import type { TChatTurnEvent } from "@/server/agent/agent.schema";

/**
 * A turn's timings: `queue_wait` (send → workspace attached and leased), `tool` (the summed time from each
 * tool call to its result) and `model` (the rest of the loop). Recorded once per turn, un-awaited, through
 * the stage buffer, so a turn never waits on the metrics.
 */
export class TurnTimer {
  private readonly startedAt = Date.now();
  private readonly openCalls = new Map<string, number>();
  private toolMs = 0;

  constructor(
    private readonly facts: {
      tenantId: string;
      record: { id: string; backendKind: string };
      requestedAt: number;
    },
    /** Where the samples go (the root's stage buffer). */
    private readonly stageSamples: StageSampleRecorder,
  ) {}

  observe(event: TChatTurnEvent, at = Date.now()): void {
    if (event.type === "tool-call") this.openCalls.set(event.toolCallId, at);
    else if (event.type === "tool-result") {
      const started = this.openCalls.get(event.toolCallId);
      this.openCalls.delete(event.toolCallId);
      if (started !== undefined) this.toolMs += at - started;
    }
  }

  finish(ok: boolean, onError: (error: unknown) => void, at = Date.now()): void {
    const base = {
      tenantId: this.facts.tenantId,
      workspaceId: this.facts.record.id,
      kind: "turn" as const,
      backend: this.facts.record.backendKind,
      path: "turn" as const,
      ok,
      at: new Date(at),
    };
    const loopMs = at - this.startedAt;
    void this.stageSamples.record(
      [
        { ...base, stage: "queue_wait", durationMs: this.startedAt - this.facts.requestedAt },
        { ...base, stage: "tool", durationMs: this.toolMs },
        { ...base, stage: "model", durationMs: Math.max(loopMs - this.toolMs, 0) },
      ],
      onError,
    );
  }
}
