"use client";

/** Errors of a tenant page (a failed query, a lost membership) stay inside the shell. */
export default function TenantPageError({
  error,
  reset,
}: {
  error: Error & { digest?: string };
  reset: () => void;
}) {
  return (
    <div className="panel">
      <h2>Something went wrong</h2>
      <div className="alert error" role="alert">
        {error.message || "The page could not be loaded."}
      </div>
      <p className="muted">
        {error.digest ? (
          <>
            Reference: <code>{error.digest}</code>
          </>
        ) : null}
      </p>
      <button type="button" className="secondary" onClick={reset}>
        Try again
      </button>
    </div>
  );
}
