"""What a failed Spark job says: one line naming the exception, not the last frame of a Java stack."""

from __future__ import annotations

from peers.spark_session import failure_line

PY4J_TEXT = """An error occurred while calling o87.count.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 3.0 failed 1 times, \
most recent failure: Lost task 1.0 in stage 3.0 (TID 9) (127.0.0.1 executor driver): \
java.lang.OutOfMemoryError: Java heap space
\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)
\tat org.apache.spark.executor.Executor$TaskRunner.run(Executor.scala:620)
\tat java.base/java.lang.Thread.run(Thread.java:840)
Caused by: java.lang.OutOfMemoryError: Java heap space
\tat java.base/java.lang.Thread.run(Thread.java:840)
"""


def test_the_message_is_the_first_line_naming_an_exception():
    line = failure_line(RuntimeError(PY4J_TEXT))
    assert line.startswith("org.apache.spark.SparkException: Job aborted due to stage failure")
    assert line.endswith("java.lang.OutOfMemoryError: Java heap space")
    assert "\n" not in line and "Thread.run" not in line


def test_a_python_worker_error_names_its_exception():
    text = """
  An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/work/peers/spark_tasks.py", line 120, in simulate_chunk
    raise MemoryError
MemoryError: the chunk's rows do not fit
"""
    assert failure_line(RuntimeError(text)) == "MemoryError: the chunk's rows do not fit"


def test_without_an_exception_named_the_first_line_or_the_class_name():
    assert failure_line(RuntimeError("Java gateway process exited\n\tat nothing")) == "Java gateway process exited"
    assert failure_line(TimeoutError()) == "TimeoutError"
