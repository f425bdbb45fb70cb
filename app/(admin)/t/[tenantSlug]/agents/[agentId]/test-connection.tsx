"use client";

import { useMutation } from "@tanstack/react-query";
import { PlugZap } from "lucide-react";
import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";
import { useTRPC } from "@/app/_trpc/client";

/** "Test connection": one tiny completion with the stored endpoint, model and key; the answer in words. */
export function TestConnection({ tenantSlug, agentId }: { tenantSlug: string; agentId: string }) {
  const trpc = useTRPC();
  const check = useMutation(trpc.agent.testConnection.mutationOptions());
  const result = check.data;
  return (
    <div className="grid gap-3">
      <Button
        variant="outline"
        disabled={check.isPending}
        onClick={() => check.mutate({ tenantSlug, agentId })}
      >
        <PlugZap /> {check.isPending ? "Testing…" : "Test connection"}
      </Button>
      {check.error && <Alert>{check.error.message}</Alert>}
      {result && (
        <Alert tone={result.ok ? "success" : "error"} data-testid="connection-result">
          {result.ok ? (
            <>
              Connected: <code>{result.model}</code> answered in {result.latencyMs} ms.
            </>
          ) : (
            <>{result.message}</>
          )}
        </Alert>
      )}
    </div>
  );
}
