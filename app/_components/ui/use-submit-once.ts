"use client";

import { useRef } from "react";

/** A fresh idempotency key: 32 hex characters (crypto.randomUUID exists only on https and localhost). */
function newIdempotencyKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/**
 * One submission at a time for a create form. The submit button is disabled while the mutation is pending,
 * but a double click lands both clicks before React re-renders it: this guard drops a submit while one is in
 * flight. Each submission carries an idempotency key for the server, kept after a failure (a retry may be the
 * same create whose answer was lost) and renewed after a success (the next submission is another create).
 * `send` reports its failure through the mutation's own error state; its rejection is absorbed here.
 */
export function useSubmitOnce(): (send: (idempotencyKey: string) => Promise<unknown>) => void {
  const inFlight = useRef(false);
  const key = useRef<string | null>(null);
  return (send) => {
    if (inFlight.current) return;
    inFlight.current = true;
    key.current ??= newIdempotencyKey();
    send(key.current)
      .then(
        () => {
          key.current = null;
        },
        () => undefined,
      )
      .finally(() => {
        inFlight.current = false;
      });
  };
}

/**
 * A form's `onChange`: forgets the mutation's error as soon as the user edits a field, so a validation
 * message does not stay on screen after the field is fixed (the next submit checks again).
 */
export function resetErrorOnEdit(...mutations: { isError: boolean; reset: () => void }[]): () => void {
  return () => {
    for (const mutation of mutations) if (mutation.isError) mutation.reset();
  };
}
