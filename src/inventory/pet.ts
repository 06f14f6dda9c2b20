export const petStatuses = ['available', 'pending', 'sold'] as const;
export type PetStatus = (typeof petStatuses)[number];

/** What a client sends to add an animal, after validation (name trimmed, status defaulted). */
export interface NewPet {
  name: string;
  categoryId: number;
  status: PetStatus;
}

/** An animal as the API shows it. */
export interface Pet extends NewPet {
  id: number;
}
