"use client";

import { Pencil } from "lucide-react";
import { type FormEvent, type ReactNode, useState } from "react";
import { Alert } from "./alert";
import { Button } from "./button";
import { Dialog, DialogContent, DialogDescription, DialogFooter, DialogHeader, DialogTitle } from "./dialog";
import { Field } from "./field";
import { Input } from "./input";

/** The pencil that opens a RenameDialog; with `showText` it also says "Rename" (a page header). */
export function RenameButton({
  ariaLabel,
  onClick,
  showText = false,
}: {
  ariaLabel: string;
  onClick: () => void;
  showText?: boolean;
}) {
  return (
    <Button
      size={showText ? "sm" : "icon-sm"}
      variant={showText ? "outline" : "ghost"}
      title="Rename"
      aria-label={ariaLabel}
      onClick={onClick}
    >
      <Pencil />
      {showText && "Rename"}
    </Button>
  );
}

/**
 * A one-field form naming something (a workspace, a session), controlled by its owner. The owner keeps
 * `open` OUTSIDE anything that remounts: a table cell does on every live update, which closed a dialog kept
 * there before it could be used. `save` gets the trimmed name ("" clears it); the dialog closes once it
 * resolves and shows its error otherwise. Saving is refused while a save runs, so a double click saves once.
 */
export function RenameDialog({
  open,
  onOpenChange,
  title,
  description,
  formLabel,
  current,
  maxLength,
  save,
}: {
  open: boolean;
  onOpenChange: (open: boolean) => void;
  title: string;
  description: ReactNode;
  /** The form's accessible name ("Rename session"). */
  formLabel: string;
  current: string;
  maxLength: number;
  save: (name: string) => Promise<unknown>;
}) {
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    if (pending) return;
    const value = new FormData(event.currentTarget).get("name");
    setPending(true);
    setError(null);
    save(typeof value === "string" ? value.trim() : "")
      .then(
        () => onOpenChange(false),
        (failure: unknown) =>
          setError(failure instanceof Error ? failure.message : "Could not save the name."),
      )
      .finally(() => setPending(false));
  };
  return (
    <Dialog
      open={open}
      onOpenChange={(next) => {
        if (next) setError(null);
        onOpenChange(next);
      }}
    >
      <DialogContent>
        <form className="grid gap-4" aria-label={formLabel} onSubmit={submit}>
          <DialogHeader>
            <DialogTitle>{title}</DialogTitle>
            <DialogDescription>{description}</DialogDescription>
          </DialogHeader>
          <Field label="Name">
            <Input name="name" maxLength={maxLength} defaultValue={current} autoFocus />
          </Field>
          {error && <Alert>{error}</Alert>}
          <DialogFooter>
            <Button type="button" variant="outline" onClick={() => onOpenChange(false)}>
              Cancel
            </Button>
            <Button type="submit" disabled={pending}>
              {pending ? "Saving…" : "Save"}
            </Button>
          </DialogFooter>
        </form>
      </DialogContent>
    </Dialog>
  );
}
