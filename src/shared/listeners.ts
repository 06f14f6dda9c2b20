/**
 * A set of callbacks with an unsubscribe function per registration. A throwing listener is isolated:
 * it must not stop the others, nor turn a committed store write into a failed one.
 */
export class Listeners<T extends unknown[]> {
  private readonly listeners = new Set<(...args: T) => void>();

  add(listener: (...args: T) => void): () => void {
    // Wrapped so one function registered twice gets two independent registrations.
    const entry = (...args: T) => listener(...args);
    this.listeners.add(entry);
    return () => {
      this.listeners.delete(entry);
    };
  }

  emit(...args: T): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(...args);
      } catch {
        // Isolation, see the class comment.
      }
    }
  }

  clear(): void {
    this.listeners.clear();
  }

  get size(): number {
    return this.listeners.size;
  }
}
