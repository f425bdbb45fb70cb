"use client";

import { Alert } from "./alert";
import { CopyButton } from "./copy-button";

/** A link shown once (only its hash is stored): what it is, the link itself and a copy button. */
export function OneTimeLink({ notice, link, testId }: { notice: string; link: string; testId: string }) {
  return (
    <div className="grid gap-3">
      <Alert tone="success">{notice}</Alert>
      <div className="flex items-center gap-1 rounded-md border p-1 pl-3">
        <code className="min-w-0 flex-1 truncate text-xs" data-testid={testId}>
          {link}
        </code>
        <CopyButton value={link} label="Copy invitation link" />
      </div>
    </div>
  );
}
