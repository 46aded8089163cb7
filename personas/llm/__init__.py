"""LLM seats over any OpenAI-compatible chat-completions endpoint (docs/llm.md).

``factory`` (``make_llm_persona``, ``LLMSettings``, ``load_personas_file``) is the entry
point; ``persona`` the seat, ``client`` the retry loop, ``prompts`` the prompt texts
(``prompts/*.md``, ``variants/*.md``).  The loopback endpoint tests talk to is not a
persona: ``calbench_devtools.mock_endpoint``.  Nothing is imported here, so importing the
package stays cheap.
"""
