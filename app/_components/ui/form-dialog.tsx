"use client";

import type { ReactNode } from "react";
import { Button } from "./button";
import {
  Dialog,
  DialogContent,
  DialogDescription,
  DialogFooter,
  DialogHeader,
  DialogTitle,
  DialogTrigger,
} from "./dialog";

/**
 * A dialog opened by `trigger` that holds a form, then what the form made: the caller owns `open` so it
 * can forget a one-time result when the dialog closes (`onClose`, also on Escape and the close button).
 */
export function FormDialog({
  trigger,
  title,
  description,
  open,
  onOpen,
  onClose,
  children,
}: {
  trigger: ReactNode;
  title: string;
  description: ReactNode;
  open: boolean;
  onOpen: () => void;
  onClose: () => void;
  children: ReactNode;
}) {
  return (
    <Dialog open={open} onOpenChange={(next) => (next ? onOpen() : onClose())}>
      <DialogTrigger asChild>{trigger}</DialogTrigger>
      <DialogContent>
        <DialogHeader>
          <DialogTitle>{title}</DialogTitle>
          <DialogDescription>{description}</DialogDescription>
        </DialogHeader>
        {children}
      </DialogContent>
    </Dialog>
  );
}

/** The footer of a dialog showing its result: one button that closes it. */
export function DoneFooter({ onDone }: { onDone: () => void }) {
  return (
    <DialogFooter>
      <Button variant="outline" onClick={onDone}>
        Done
      </Button>
    </DialogFooter>
  );
}

/** The footer of a dialog's form: its submit button, which says so while the request is pending. */
export function SubmitFooter({
  pending,
  label,
  pendingLabel,
}: {
  pending: boolean;
  label: string;
  pendingLabel: string;
}) {
  return (
    <DialogFooter>
      <Button type="submit" disabled={pending}>
        {pending ? pendingLabel : label}
      </Button>
    </DialogFooter>
  );
}
