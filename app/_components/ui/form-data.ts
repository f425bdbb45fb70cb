/** A form field as a string ("" when absent or a file), untrimmed: passwords keep their spaces. */
export function formString(form: FormData, name: string): string {
  const value = form.get(name);
  return typeof value === "string" ? value : "";
}
