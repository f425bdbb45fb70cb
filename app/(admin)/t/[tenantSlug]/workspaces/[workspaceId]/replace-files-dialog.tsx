"use client";

import { Button } from "@/app/_components/ui/button";
import {
  Dialog,
  DialogContent,
  DialogDescription,
  DialogFooter,
  DialogHeader,
  DialogTitle,
} from "@/app/_components/ui/dialog";

/**
 * Asked after an upload whose files already exist in the folder (the API refuses to overwrite unless
 * told to): Replace uploads them again over the old ones, Keep existing leaves them as they were.
 */
export function ReplaceFilesDialog({
  names,
  folder,
  onReplace,
  onKeep,
}: {
  names: string[] | null;
  folder: string;
  onReplace: () => void;
  onKeep: () => void;
}) {
  const count = names?.length ?? 0;
  return (
    <Dialog open={count > 0} onOpenChange={(open) => !open && onKeep()}>
      <DialogContent data-testid="replace-files-dialog">
        <DialogHeader>
          <DialogTitle>
            {count === 1 ? "Replace an existing file?" : `Replace ${count} existing files?`}
          </DialogTitle>
          <DialogDescription>
            {count === 1 ? "This file is" : "These files are"} already in{" "}
            {folder === "." ? "the workspace root" : folder}: uploading again replaces{" "}
            {count === 1 ? "it" : "them"} for the agent too.
          </DialogDescription>
        </DialogHeader>
        <ul className="max-h-40 overflow-auto font-mono text-sm" aria-label="Existing files">
          {names?.map((name) => (
            <li key={name}>{name}</li>
          ))}
        </ul>
        <DialogFooter>
          <Button variant="outline" onClick={onKeep}>
            Keep existing
          </Button>
          <Button onClick={onReplace}>Replace</Button>
        </DialogFooter>
      </DialogContent>
    </Dialog>
  );
}
