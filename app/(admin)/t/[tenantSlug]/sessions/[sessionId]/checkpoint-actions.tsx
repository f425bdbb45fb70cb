"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { GitBranch, Undo2 } from "lucide-react";
import { useRouter } from "next/navigation";
import { type FormEvent, useRef, useState } from "react";
import { toast } from "sonner";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { ConfirmDialog } from "@/app/_components/ui/confirm-dialog";
import {
  Dialog,
  DialogContent,
  DialogDescription,
  DialogFooter,
  DialogHeader,
  DialogTitle,
  DialogTrigger,
} from "@/app/_components/ui/dialog";
import { Field } from "@/app/_components/ui/field";
import { formString } from "@/app/_components/ui/form-data";
import { Input } from "@/app/_components/ui/input";
import { useTRPC } from "@/app/_trpc/client";
import { useCheckpoints } from "./checkpoint-context";

/**
 * Runs one call at a time: a double click lands both clicks before React re-renders the button disabled,
 * so `disabled={isPending}` alone would send the second (the server refuses it as a CONFLICT, which would
 * then read as a failure of the first).
 */
export function useOneAtATime() {
  const busy = useRef(false);
  return async (run: () => Promise<unknown>) => {
    if (busy.current) return;
    busy.current = true;
    try {
      await run();
    } finally {
      busy.current = false;
    }
  };
}

/** A refusal in words: a CONFLICT (a turn or another revert is running) says to wait, not that it broke. */
function RefusalAlert({
  error,
  action,
  className,
}: {
  error: { message: string; data?: unknown } | null;
  action: string;
  className?: string;
}) {
  if (!error) return null;
  const code = (error.data as { code?: string } | undefined)?.code;
  return (
    <Alert data-testid="checkpoint-action-error" data-code={code} className={className}>
      {code === "CONFLICT" ? `Not now: ${error.message}` : `Could not ${action}: ${error.message}`}
    </Alert>
  );
}

/**
 * "Revert to this turn" (a fragment: its button and its refusal go in the dialog's footer): the workers bring the session's workspace back to the checkpoint; the later turns
 * stay in the transcript, marked reverted. `onStarted` closes the diff so the progress above the chat shows.
 */
export function RevertAction({ checkpointId, onStarted }: { checkpointId: string; onStarted: () => void }) {
  const trpc = useTRPC();
  const { tenantSlug, sessionId, changeRefusal, restoreId, followRestore } = useCheckpoints();
  const once = useOneAtATime();
  const revert = useMutation(trpc.checkpoint.revert.mutationOptions());
  return (
    <>
      <ConfirmDialog
        title="Revert the workspace to this turn?"
        description={
          "The workspace's files go back to how this turn left them: files made later are deleted, and files changed or removed later come back.\n\n" +
          "The later turns are not deleted: they stay in the chat, dimmed and marked reverted, and the agent no longer sees them. A turn must not be running meanwhile."
        }
        confirmLabel="Revert"
        onConfirm={() =>
          once(() =>
            revert.mutateAsync({ tenantSlug, sessionId, checkpointId }).then(
              ({ restoreId: started }) => {
                followRestore(started);
                onStarted();
              },
              // Shown below from the mutation's error.
              () => undefined,
            ),
          )
        }
        trigger={
          <Button
            variant="outline"
            size="sm"
            disabled={changeRefusal !== null || revert.isPending || restoreId !== null}
            title={changeRefusal ?? undefined}
          >
            <Undo2 /> {revert.isPending ? "Reverting…" : "Revert to this turn"}
          </Button>
        }
      />
      {/* On a line of its own below the actions (the footer wraps). */}
      <RefusalAlert error={revert.error} action="revert" className="order-last w-full" />
    </>
  );
}

/** "Fork from this turn": a new session (and workspace) that starts as the checkpoint; opens it. */
export function ForkAction({ checkpointId }: { checkpointId: string }) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const { tenantSlug, sessionId, changeRefusal } = useCheckpoints();
  const [open, setOpen] = useState(false);
  const once = useOneAtATime();
  const fork = useMutation(
    trpc.checkpoint.fork.mutationOptions({
      onSuccess: async (created) => {
        toast.success("Forked: the new session starts as this turn left the workspace.");
        await queryClient.invalidateQueries({ queryKey: trpc.session.pathKey() });
        // With its restore: the new page shows the workspace being filled until it is ready.
        router.push(
          `/t/${encodeURIComponent(tenantSlug)}/sessions/${encodeURIComponent(created.sessionId)}?restore=${encodeURIComponent(created.restoreId)}`,
        );
      },
    }),
  );
  // After a success the page is leaving: a second submit would fork again.
  const pending = fork.isPending || fork.isSuccess;

  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const name = formString(new FormData(event.currentTarget), "name").trim();
    void once(() =>
      fork
        .mutateAsync({ tenantSlug, sessionId, checkpointId, ...(name ? { name } : {}) })
        .catch(() => undefined),
    );
  }

  return (
    <Dialog open={open} onOpenChange={setOpen}>
      <DialogTrigger asChild>
        <Button
          variant="outline"
          size="sm"
          disabled={changeRefusal !== null}
          title={changeRefusal ?? undefined}
        >
          <GitBranch /> Fork from this turn
        </Button>
      </DialogTrigger>
      <DialogContent>
        <DialogHeader>
          <DialogTitle>Fork from this turn</DialogTitle>
          <DialogDescription>
            A new session with this session&apos;s messages up to this turn, in a workspace of its own that
            starts with the files as this turn left them. This session is not changed.
          </DialogDescription>
        </DialogHeader>
        <form className="grid gap-4" aria-label="Fork session" onSubmit={submit}>
          <Field label="Name" hint="Optional. Empty: this session's name with “(fork)”.">
            <Input name="name" maxLength={200} autoComplete="off" />
          </Field>
          <RefusalAlert error={fork.error} action="fork" />
          <DialogFooter>
            <Button type="submit" disabled={pending}>
              {pending ? "Forking…" : "Fork session"}
            </Button>
          </DialogFooter>
        </form>
      </DialogContent>
    </Dialog>
  );
}
