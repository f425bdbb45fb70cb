"use client";

import { useQuery } from "@tanstack/react-query";
import { Alert } from "@/app/_components/ui/alert";
import { cn } from "@/app/_components/ui/cn";
import { Skeleton } from "@/app/_components/ui/skeleton";
import { useTRPC } from "@/app/_trpc/client";
import { useCheckpoints } from "./checkpoint-context";
import { type DiffLine, parseUnifiedDiff } from "./unified-diff";

const LINE_TONE: Record<DiffLine["kind"], string> = {
  hunk: "bg-info/10 text-info",
  added: "bg-success/10",
  removed: "bg-destructive/10",
  context: "",
  note: "text-muted-foreground italic",
};
const MARK: Record<DiffLine["kind"], string> = { hunk: "", added: "+", removed: "-", context: " ", note: "" };

/** One changed file of a turn as a unified text diff: old and new line numbers, added green, removed red. */
export function FileDiffView({ checkpointId, path }: { checkpointId: string; path: string }) {
  const trpc = useTRPC();
  const { tenantSlug, sessionId } = useCheckpoints();
  const fileDiff = useQuery(
    trpc.checkpoint.fileDiff.queryOptions({ tenantSlug, sessionId, checkpointId, path }),
  );
  if (fileDiff.error) return <Alert>{fileDiff.error.message}</Alert>;
  if (!fileDiff.data) return <Skeleton className="h-40 w-full" />;
  if (fileDiff.data.binary || fileDiff.data.diff === null) {
    return (
      <p className="text-muted-foreground p-4 text-sm" data-testid="file-diff-binary">
        Binary or large file (over 512 KiB): no text diff is shown.
      </p>
    );
  }
  const lines = parseUnifiedDiff(fileDiff.data.diff);
  if (lines.length === 0) {
    return (
      <p className="text-muted-foreground p-4 text-sm" data-testid="file-diff-empty">
        No text changed (an empty file, or only its mode).
      </p>
    );
  }
  return (
    <div className="overflow-x-auto" data-testid="file-diff">
      <table className="w-full border-collapse font-mono text-xs leading-5">
        <tbody>
          {lines.map((line, index) => (
            <tr key={index} className={LINE_TONE[line.kind]} data-kind={line.kind} data-testid="diff-line">
              {line.kind === "hunk" || line.kind === "note" ? (
                <td colSpan={4} className="px-2 whitespace-pre">
                  {line.kind === "note" ? `\\ ${line.text}` : line.text}
                </td>
              ) : (
                <>
                  <td className="text-muted-foreground w-10 border-r px-2 text-right tabular-nums select-none">
                    {line.oldLine ?? ""}
                  </td>
                  <td className="text-muted-foreground w-10 border-r px-2 text-right tabular-nums select-none">
                    {line.newLine ?? ""}
                  </td>
                  <td
                    aria-hidden
                    className={cn(
                      "w-4 pl-1 select-none",
                      line.kind === "added" && "text-success",
                      line.kind === "removed" && "text-destructive",
                    )}
                  >
                    {MARK[line.kind]}
                  </td>
                  <td className="pr-2 whitespace-pre">{line.text}</td>
                </>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
