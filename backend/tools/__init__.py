"""Tool calling: typed Python functions the model may call, in Gemma 4's native format.

* ``spec``: a ``Tool`` from a plain typed function (docstring = description, signature = schema).
* the call syntax itself (``<|tool_call>call:NAME{...}<tool_call|>``), its values and the
  declarations the template writes are Gemma 4's format: ``backend.gemma4``.
* ``sandbox``: the directories the file tools may read.
* ``builtins``: calculator, current_time, read_file, list_directory, search_history.
* ``registry``: built-ins plus plug-ins from the ``gemma_chat.tools`` entry-point group.
* ``runner``: validating, approving and running one call (timeout, errors) into a ``ToolRecord``.
* ``loop``: a turn that calls tools until the model answers or the step limit is reached.
"""
