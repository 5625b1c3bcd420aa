"""The one exception a refusal raises: it carries the sentence the user reads after `Error: `."""


class Refusal(Exception):
    """A request Zrodlo will not carry out; `sentence` says which value was read and what is needed."""

    def __init__(self, sentence: str) -> None:
        super().__init__(sentence)
        self.sentence = sentence
