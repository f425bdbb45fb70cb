"use client";

import { Alert } from "@/app/_components/ui/alert";
import { Button } from "@/app/_components/ui/button";

/** Errors of a tenant page (a failed query, a lost membership) stay inside the shell. */
export default function TenantPageError({
  error,
  reset,
}: {
  error: Error & { digest?: string };
  reset: () => void;
}) {
  return (
    <div className="mx-auto flex max-w-lg flex-col gap-4 py-16">
      <h1 className="text-xl">Something went wrong</h1>
      <Alert>{error.message || "The page could not be loaded."}</Alert>
      {error.digest && (
        <p className="text-muted-foreground text-xs">
          Reference: <code>{error.digest}</code>
        </p>
      )}
      <div>
        <Button variant="outline" onClick={reset}>
          Try again
        </Button>
      </div>
    </div>
  );
}
